//go:build !unix

package github

import "errors"

type credentialServer struct{ path string }

func serveCredential(string, []byte) (*credentialServer, error) {
	return nil, errors.New("github: credentialed git needs a unix system")
}

func (*credentialServer) Close() {}
