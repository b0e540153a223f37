// tlogcheck checks spillage's C2SP notes and proofs with Go's golang.org/x/mod/sumdb/note and
// sumdb/tlog, an implementation spillage did not write (tests/test_c2sp.py builds it offline).
//
//	tlogcheck note VKEY FILE                  open a signed note; print its text
//	tlogcheck proof VKEY ORIGIN FILE          check a c2sp.org/tlog-proof whose extra line is the record;
//	                                          print the index, the tree size and the record
//	tlogcheck tree OLDSIZE OLDROOT NEWSIZE NEWROOT HASH...   check a consistency proof (base64 hashes)
//
// It exits 0 when the check holds, 1 with the reason on stderr when it does not.
package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "tlogcheck: "+format+"\n", args...)
	os.Exit(1)
}

func hash(b64 string) tlog.Hash {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != tlog.HashSize {
		fail("not a base64 SHA-256 hash: %q", b64)
	}
	var h tlog.Hash
	copy(h[:], raw)
	return h
}

func open(vkey string, msg []byte) *note.Note {
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		fail("verifier key: %v", err)
	}
	n, err := note.Open(msg, note.VerifierList(verifier))
	if err != nil {
		fail("note: %v", err)
	}
	return n
}

// checkpoint parses a tlog-checkpoint note text: origin, tree size, root hash.
func checkpoint(text string) (string, int64, tlog.Hash) {
	lines := strings.Split(text, "\n")
	if len(lines) < 4 {
		fail("checkpoint: fewer than three lines")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 {
		fail("checkpoint: bad tree size %q", lines[1])
	}
	return lines[0], size, hash(lines[2])
}

func proof(vkey, origin string, data []byte) {
	parts := bytes.SplitN(data, []byte("\n\n"), 2)
	if len(parts) != 2 {
		fail("proof: no blank line before the checkpoint")
	}
	lines := strings.Split(string(parts[0]), "\n")
	if lines[0] != "c2sp.org/tlog-proof@v1" {
		fail("proof: first line is %q", lines[0])
	}
	lines = lines[1:]
	var record []byte
	if strings.HasPrefix(lines[0], "extra ") {
		var err error
		if record, err = base64.StdEncoding.DecodeString(lines[0][6:]); err != nil {
			fail("proof: extra is not base64")
		}
		lines = lines[1:]
	}
	if !strings.HasPrefix(lines[0], "index ") {
		fail("proof: no index line")
	}
	index, err := strconv.ParseInt(lines[0][6:], 10, 64)
	if err != nil {
		fail("proof: bad index %q", lines[0])
	}
	var path tlog.RecordProof
	for _, line := range lines[1:] {
		path = append(path, hash(line))
	}
	n := open(vkey, parts[1])
	got, size, root := checkpoint(n.Text)
	if got != origin {
		fail("checkpoint origin is %q, not %q", got, origin)
	}
	if err := tlog.CheckRecord(path, size, root, index, tlog.RecordHash(record)); err != nil {
		fail("inclusion: %v", err)
	}
	fmt.Printf("index %d of %d signed by %s\n%s\n", index, size, n.Sigs[0].Name, record)
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: tlogcheck note|proof|tree ...")
	}
	switch args := os.Args[2:]; os.Args[1] {
	case "note":
		data, err := os.ReadFile(args[1])
		if err != nil {
			fail("%v", err)
		}
		fmt.Print(open(args[0], data).Text)
	case "proof":
		data, err := os.ReadFile(args[2])
		if err != nil {
			fail("%v", err)
		}
		proof(args[0], args[1], data)
	case "tree":
		oldSize, err1 := strconv.ParseInt(args[0], 10, 64)
		newSize, err2 := strconv.ParseInt(args[2], 10, 64)
		if err1 != nil || err2 != nil {
			fail("tree: bad sizes")
		}
		var path tlog.TreeProof
		for _, h := range args[4:] {
			path = append(path, hash(h))
		}
		if err := tlog.CheckTree(path, newSize, hash(args[3]), oldSize, hash(args[1])); err != nil {
			fail("consistency: %v", err)
		}
		fmt.Printf("tree of %d extends tree of %d\n", newSize, oldSize)
	default:
		fail("unknown command %q", os.Args[1])
	}
}
