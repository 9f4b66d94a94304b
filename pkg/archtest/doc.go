// Package archtest enforces the repository's architecture rules as tests:
// which modules each package may import, that internal imports point one
// way (cmd → gate|worker|cli → store|wire|plugin|… → ident|strictjson|
// policy|…, by the ranks in layers_test.go), and that every package
// documents itself exactly once. It has no runtime code.
package archtest
