// Package archtest enforces the repository's architecture rules as tests:
// which modules each package may import and that every package documents
// itself exactly once. It has no runtime code.
package archtest
