package publish

import "errors"

func asError(err error, e **Error) bool { return errors.As(err, e) }
