// Command tlogcheck verifies a ledger's transparency log from its tlog-tiles URLs alone, with
// golang.org/x/mod/sumdb/tlog and golang.org/x/mod/sumdb/note (a standard client, not our code).
//
//	tlogcheck -url http://127.0.0.1:8080 -vkey NAME+ID+KEY -index 5 -old 3 [-oldroot B64] [-token T]
//
// It fetches /checkpoint, verifies its signature, proves leaf -index (from /tile/entries) included
// in that tree and the tree -old consistent with it, reading only /tile/... hashes.
package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

var (
	baseURL = flag.String("url", "", "log base URL")
	vkey    = flag.String("vkey", "", "verifier key name+id+base64")
	index   = flag.Int64("index", 0, "leaf index to prove")
	oldSize = flag.Int64("old", 0, "older tree size to prove consistency from")
	token   = flag.String("token", "", "bearer token")
	oldRoot = flag.String("oldroot", "", "base64 root of the older tree (from its signed checkpoint)")
)

func get(path string) ([]byte, error) {
	req, err := http.NewRequest("GET", strings.TrimRight(*baseURL, "/")+"/"+path, nil)
	if err != nil {
		return nil, err
	}
	if *token != "" {
		req.Header.Set("Authorization", "Bearer "+*token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return body, nil
}

// tilePath is the C2SP tlog-tiles path of a tile: sumdb's path without the height element.
func tilePath(t tlog.Tile) string {
	p := t.Path() // tile/8/L/NNN[.p/W]
	return "tile/" + strings.SplitN(p, "/", 3)[2]
}

type reader struct{}

func (reader) Height() int { return 8 }

func (reader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data, err := get(tilePath(t))
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}

func (reader) SaveTiles([]tlog.Tile, [][]byte) {}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "FAIL: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	flag.Parse()
	raw, err := get("checkpoint")
	if err != nil {
		fail("%v", err)
	}
	verifier, err := note.NewVerifier(*vkey)
	if err != nil {
		fail("verifier key: %v", err)
	}
	n, err := note.Open(raw, note.VerifierList(verifier))
	if err != nil {
		fail("checkpoint signature: %v", err)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) < 4 || lines[0] != verifier.Name() {
		fail("checkpoint origin %q is not %q", lines[0], verifier.Name())
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		fail("tree size: %v", err)
	}
	rootBytes, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(rootBytes) != tlog.HashSize {
		fail("root hash %q", lines[2])
	}
	var tree tlog.Tree
	tree.N = size
	copy(tree.Hash[:], rootBytes)
	hashes := tlog.TileHashReader(tree, reader{})

	// the leaf: its entry from the entry bundle at /tile/entries/...
	bundleTile := tlog.Tile{H: 8, L: -1, N: *index / 256, W: 256}
	if rest := size - bundleTile.N*256; rest < 256 {
		bundleTile.W = int(rest)
	}
	bundle, err := get("tile/entries/" + strings.SplitN(bundleTile.Path(), "/", 4)[3])
	if err != nil {
		fail("%v", err)
	}
	r := bufio.NewReader(bytes.NewReader(bundle))
	var entry []byte
	for i := int64(0); i <= *index%256; i++ {
		var length uint16
		if err := binary.Read(r, binary.BigEndian, &length); err != nil {
			fail("entry bundle: %v", err)
		}
		entry = make([]byte, length)
		if _, err := io.ReadFull(r, entry); err != nil {
			fail("entry bundle: %v", err)
		}
	}
	proof, err := tlog.ProveRecord(size, *index, hashes)
	if err != nil {
		fail("ProveRecord: %v", err)
	}
	if err := tlog.CheckRecord(proof, size, tree.Hash, *index, tlog.RecordHash(entry)); err != nil {
		fail("CheckRecord: %v", err)
	}
	fmt.Printf("inclusion ok: leaf %d in tree %d (root %s)\n", *index, size, tree.Hash)

	oldHash, err := tlog.TreeHash(*oldSize, hashes)
	if err != nil {
		fail("TreeHash(%d): %v", *oldSize, err)
	}
	if *oldRoot != "" && base64.StdEncoding.EncodeToString(oldHash[:]) != *oldRoot {
		fail("tree %d hashes to %s from the tiles, its checkpoint says %s", *oldSize, oldHash, *oldRoot)
	}
	cproof, err := tlog.ProveTree(size, *oldSize, hashes)
	if err != nil {
		fail("ProveTree: %v", err)
	}
	if err := tlog.CheckTree(cproof, size, tree.Hash, *oldSize, oldHash); err != nil {
		fail("CheckTree: %v", err)
	}
	fmt.Printf("consistency ok: tree %d (root %s) -> tree %d\n", *oldSize, oldHash, size)
}
