package install

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// servedBy reports (nil) whether the server side of conn, a TCP
// connection to a loopback IPv4 listener, is a socket open in process
// pid. It finds the connection's other end in /proc/net/tcp (local = our
// remote, remote = our local, established) and its inode among pid's
// file descriptors, waiting briefly for the server to accept it (an
// unaccepted socket has no inode yet). Nothing is written to conn.
func servedBy(ctx context.Context, conn net.Conn, pid int) error {
	local, ok1 := conn.LocalAddr().(*net.TCPAddr)
	remote, ok2 := conn.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 || local.IP.To4() == nil || remote.IP.To4() == nil {
		return errors.New("not an IPv4 TCP connection")
	}
	server, client := procAddr(remote), procAddr(local)
	deadline := time.Now().Add(2 * time.Second)
	// Once accepted (an inode), the socket is in its owner's table within
	// moments (accept installs the descriptor right after creating it).
	seen := 0
	for {
		inode, err := serverInode(server, client)
		if err != nil {
			return err
		}
		if inode != "" {
			if holdsSocket(pid, inode) {
				return nil
			}
			if seen++; seen > 5 {
				return errors.New("the connection's server side is another process's")
			}
		}
		if time.Now().After(deadline) {
			return errors.New("the connection's server side is not in the process")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// procAddr renders an IPv4 address as /proc/net/tcp does: the address as
// a native-endian 32-bit hex number, the port in hex.
func procAddr(a *net.TCPAddr) string {
	return fmt.Sprintf("%08X:%04X", binary.NativeEndian.Uint32(a.IP.To4()), a.Port)
}

// serverInode returns the inode of the established socket local->remote
// ("" when it has none yet or is absent).
func serverInode(local, remote string) (string, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return "", errors.New("/proc/net/tcp cannot be read")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4096), 4096)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
		if len(fl) < 10 || fl[1] != local || fl[2] != remote || fl[3] != "01" {
			continue
		}
		if fl[9] == "0" {
			return "", nil
		}
		return fl[9], nil
	}
	if err := sc.Err(); err != nil {
		return "", errors.New("/proc/net/tcp cannot be read")
	}
	return "", nil
}

// holdsSocket reports whether pid has the socket inode open.
func holdsSocket(pid int, inode string) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	want := "socket:[" + inode + "]"
	for _, e := range entries {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && l == want {
			return true
		}
	}
	return false
}
