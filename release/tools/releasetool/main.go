// Command releasetool is the release builder's small, standard-library-only
// helper. scripts/build-release.sh compiles it from the same verified commit
// with the pinned toolchain and uses its two subcommands:
//
//	releasetool archive -dir DIR -out FILE.tar.gz -mtime UNIX_SECONDS
//	releasetool publish -from STAGING_DIR -to DESTINATION
//
// archive writes a reproducible gzip-compressed USTAR archive of the regular
// files directly inside DIR: members in byte-wise name order, no directory
// entries, uid/gid 0 with empty owner names, the given modification time,
// mode 0755 for files with any execute bit and 0644 otherwise. The gzip
// header carries no name, no modification time and the fixed OS byte 255
// ("unknown"), with best compression. The output file is created
// exclusively; an existing file is never overwritten.
//
// publish renames STAGING_DIR to DESTINATION with Linux
// renameat2(RENAME_NOREPLACE), so it fails if anything at all (a file,
// directory or symlink, even a dangling one) exists at DESTINATION at the
// moment of the rename. Both paths must be on the same filesystem. On other
// platforms publish always fails.
//
// Exit status: 0 on success, 1 on failure, 2 on usage errors. Error
// messages never contain paths.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	err := run(os.Args[1:])
	var usage usageError
	switch {
	case err == nil:
	case errors.As(err, &usage):
		fmt.Fprintln(os.Stderr, "releasetool: usage: "+err.Error())
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "releasetool: error: "+err.Error())
		os.Exit(1)
	}
}

// usageError marks a command line the tool does not accept.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

const usageText = "releasetool archive -dir DIR -out FILE -mtime SECONDS | releasetool publish -from DIR -to PATH"

func run(args []string) error {
	if len(args) == 0 {
		return usageError{usageText}
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	switch args[0] {
	case "archive":
		dir := fs.String("dir", "", "directory whose regular files become the members")
		out := fs.String("out", "", "archive to create (must not exist)")
		mtime := fs.Int64("mtime", -1, "member modification time, Unix seconds")
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 0 || *dir == "" || *out == "" || *mtime < 0 {
			return usageError{usageText}
		}
		return writeArchive(*dir, *out, *mtime)
	case "publish":
		from := fs.String("from", "", "completed staging directory")
		to := fs.String("to", "", "destination that must not exist")
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 0 || *from == "" || *to == "" {
			return usageError{usageText}
		}
		return publish(*from, *to)
	default:
		return usageError{usageText}
	}
}
