//go:build !linux

package install

import (
	"context"
	"errors"
	"net"
)

// servedBy cannot prove a connection's peer off Linux: the installer and
// doctor are Linux-only, so every connection is refused.
func servedBy(context.Context, net.Conn, int) error {
	return errors.New("the Gate's peer cannot be proved on this platform")
}
