//go:build unix

package github

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"syscall"
)

// credentialServer hands an installation token to git without putting it
// in any process's argv or environment, or in a file: a FIFO, private to
// this user inside the mirror, that git's credential helper (credentialHelper)
// reads. Every reader gets the credential once; the FIFO holds nothing
// at rest. Close stops serving and removes it.
type credentialServer struct {
	path string
	stop chan struct{}
	done chan struct{}
}

func serveCredential(dir string, payload []byte) (*credentialServer, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "forge-credential-"+hex.EncodeToString(b[:]))
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return nil, err
	}
	s := &credentialServer{path: path, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			// Blocks until a reader opens the FIFO.
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			select {
			case <-s.stop:
				f.Close()
				return
			default:
			}
			f.Write(payload)
			f.Close()
		}
	}()
	return s, nil
}

// Close stops serving: it opens the FIFO for reading itself (so a writer
// blocked in open wakes up, sees stop and writes nothing), waits for the
// writer to end and removes the FIFO.
func (s *credentialServer) Close() {
	close(s.stop)
	r, err := os.OpenFile(s.path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	<-s.done
	if err == nil {
		r.Close()
	}
	os.Remove(s.path)
}
