// Package source prepares the Gate's public-source repositories: local
// bare mirrors of one branch of a public GitHub repository, which Workers
// on the same host use like any other registered repository.
package source
