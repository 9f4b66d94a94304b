// Package ident holds the grammar and the limits of every identifier that
// crosses a boundary in Agent Forge: configuration ids (workers, plugins,
// repositories, pools), job and attempt refs, failure codes, lane names and
// slots, connection generations and plugin session ids, Git object ids and
// branch names, environment-variable names, and the evidence bounds that
// the Worker, the wire protocol and the store all enforce.
//
// It is a leaf: it imports only the standard library, so every other
// package may use it and none needs its own copy of a rule. Each predicate
// is total (any string in, a bool out, no allocation) and accepts only
// ASCII, so an accepted identifier never needs JSON escaping.
package ident
