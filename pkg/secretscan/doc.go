// Package secretscan finds secret values in byte streams: the one home of
// the rule "no secret the Worker or the Gate holds leaves in a candidate
// or in evidence" (DECISIONS 19).
//
// A Set is built once from the values a process holds (a Builder, or
// New). Each value is looked for as it is and in the forms a program
// would write it in (Forms):
//
//   - hex, lower and upper case;
//   - base64, standard and URL alphabets, at each of the three byte
//     alignments the value can have inside a longer encoded stream: the
//     pattern is the run of characters that depends on the value's bytes
//     alone, so the encoding is found with or without padding and with
//     anything before or after it;
//   - URL encoding (values of printable ASCII only): query and path
//     escaping, and every byte escaped, each with upper and lower case
//     hex digits.
//
// All patterns of a Set form one Aho-Corasick automaton over byte classes
// (a dense table built once). A Scanner carries the automaton's state
// from one Write to the next, so a stream is read in chunks of any size,
// in bounded memory, and a match that straddles two chunks is found like
// any other. The cost is one table lookup per byte whatever the number of
// values.
//
// # What it does not catch
//
// The scan finds a value written as is or in the encodings above. A
// program that transforms it otherwise (reversed, split across files,
// compressed, encrypted, another base) gets past it: the scan stops the
// accidental leak (an environment dump, a config file, a log committed
// with the change), not an agent set on smuggling a value out. Keeping
// the value out of the agent's reach is the sandbox's and the model
// gateway's job (DECISIONS 19).
//
// # Limits
//
// A value shorter than MinSecretBytes (16) is refused: a short value is
// guessable, and its encodings would match ordinary text (a 6-byte token
// has an 8-character base64 core). A value longer than MaxSecretBytes
// (4096) is refused too, and a Set holds at most MaxSecrets values, so a
// Set's table stays bounded (a few MiB at most). Errors name the value's
// index, never the value.
//
// RSAKeyValues turns an RSA private key into the values that identify it
// (the private exponent and primes, and the lines of its PEM encodings
// that only the private part determines, looked for as they are:
// Builder.AddLiteral); Builder.AddRSAKey adds them all.
//
// # Cost
//
// BenchmarkScan100MiB: 100 MiB in 0.21 s on one core (~490 MB/s,
// whatever the Set; median of 3 alternated rounds), with a 64 KiB read
// buffer; through git (gitx.BenchmarkFindSecret100MiB, 100 blobs of
// 1 MiB streamed by cat-file) 0.27 s; the table is 0.35 MiB
// for a Worker's few tokens and about 10.5 MiB for a Gate holding a
// 2048-bit App key (its raw key numbers use every byte value).
package secretscan
