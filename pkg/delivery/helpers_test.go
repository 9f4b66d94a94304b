package delivery

import (
	"fmt"
	"strings"
)

func fmtState(s State) string { return fmt.Sprintf("%+v %#v", s, s) }

func containsToken(s string) bool { return strings.Contains(s, "ghs_") }
