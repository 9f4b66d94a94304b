//go:build !linux

package supervise

import "os"

// childPipe returns one of a child's standard pipes: the parent's end
// (the read end when parentReads) and the child's end.
func childPipe(parentReads bool) (parent, child *os.File, err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	if parentReads {
		return r, w, nil
	}
	return w, r, nil
}
