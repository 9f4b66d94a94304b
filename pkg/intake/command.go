package intake

import "strings"

// StartsWithCommand reports whether comment starts with command (a
// Config's, already valid) and so is a trigger. The comment is read as the
// instruction will show it (clean: HTML comments, control and invisible
// characters gone); blank lines before it are skipped, and then its first
// line must begin with the command itself, not indented (an indented line
// is a code block), quoted or in another case, followed by the end, a
// space, a tab or a newline: "/forge", "/forge fix it"; not "/forged",
// "> /forge" or "    /forge".
func StartsWithCommand(comment, command string) bool {
	text, _ := clean(comment, MaxRawPartBytes)
	for {
		line, rest, found := strings.Cut(text, "\n")
		if strings.Trim(line, " \t") != "" || !found {
			text = line
			break
		}
		text = rest
	}
	after, ok := strings.CutPrefix(text, command)
	return ok && len(command) > 0 && (after == "" || after[0] == ' ' || after[0] == '\t')
}
