package ident

import "strconv"

// MaxSlot is the highest lane slot (a Worker runs at most MaxSlot+1 lanes).
const MaxSlot = 255

// LaneName is the server-side name of a Worker's lane: slot 0 is the worker
// id itself, slot k > 0 is "<id>#k".
func LaneName(workerID string, slot int) string {
	if slot == 0 {
		return workerID
	}
	return workerID + "#" + strconv.Itoa(slot)
}

// ValidLane reports whether s is a lane name LaneName could produce for a
// valid worker id and a slot in 0..MaxSlot.
func ValidLane(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '#' {
			continue
		}
		n := s[i+1:]
		if !ValidID(s[:i]) || n == "" || n[0] == '0' || len(n) > 3 {
			return false
		}
		k, err := strconv.Atoi(n)
		return err == nil && k >= 1 && k <= MaxSlot && strconv.Itoa(k) == n
	}
	return ValidID(s)
}
