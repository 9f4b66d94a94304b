// Package configfile is the one way an Agent Forge binary loads its JSON
// configuration file (gate.json, worker.json, and every later file such as
// forge-github's config or the install receipt). Loading has one shape:
//
//  1. read at most MaxBytes (a larger file is refused, nothing is decoded);
//  2. check the "version" member first, so a file written for another
//     version is refused as such rather than for a field it does not know;
//  3. decode strictly with pkg/strictjson into the file's Go type: unknown,
//     duplicate or case-variant keys, nulls, trailing data and values that
//     do not fit their field (including a duration that does not parse, via
//     its UnmarshalText) are refused at their JSON path;
//  4. call the type's Validate, which checks ranges and relations.
//
// Every refusal is an *Error naming the file kind and the field in one
// notation ("workers[0].token_env", see FieldPath) and a fixed reason; none
// carries a value from the file or the environment. Durations are written
// one way, Go duration strings ("30s"), decoded by policy.Duration.
//
// To add a section to a file, add a struct field with its json tag to the
// file's type and check it in that type's Validate (or a Validate of the
// section's own type, called from there, prefixing its errors' Field with
// the section's name through Prefix). Nothing here changes.
package configfile
