// Package metrics writes and reads the Prometheus text exposition format,
// version 0.0.4 (the Gate's GET /metrics, docs/api.md), with the standard
// library only.
//
// # Model
//
// A Family is one metric: a name, a help text, a type (counter, gauge or
// histogram) and its samples. A counter or gauge sample carries the
// family's name; a histogram's samples are name_bucket (one per upper
// bound, label le, cumulative, the last le="+Inf"), then name_sum and
// name_count, for each label set in turn. Histogram is the one live
// instrument (lock-free buckets); counters and gauges are values the
// caller reads when it builds the families.
//
// # Canonical form
//
// Encode writes one canonical text: per family "# HELP name text",
// "# TYPE name type", then each sample as name{l="v",...} value with one
// space, no timestamp, values formatted by strconv.FormatFloat(v, 'g', -1,
// 64) (NaN, +Inf, -Inf), label values escaping \\, \" and \n, help text
// escaping \\ and \n, every line ending in \n. Encode checks its own
// output with Parse, so it never returns text Parse refuses.
//
// Parse is strict: it accepts exactly that canonical subset of the format
// and checks what the format implies: valid metric and label names (no
// reserved __ prefix), valid UTF-8, each family declared once with HELP
// then TYPE before its samples, every sample belonging to the family
// declared just above it, no duplicate series (label order ignored), no
// le label outside histogram buckets, counters neither negative nor NaN,
// histogram series complete and ordered (strictly increasing bounds ending
// at +Inf, cumulative counts that never decrease, _count equal to the
// +Inf bucket, whole non-negative counts). Anything else is an error that
// names the line number, never its content; on error Parse returns no
// families. For every input Parse accepts, Encode of its result gives the
// input back byte for byte.
package metrics
