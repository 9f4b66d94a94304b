package sandbox

// The arm64 numbers: native AArch64 (the generic table: only the *at and
// fd forms exist), compat 32-bit arm where the CPU runs it. arm64 has no
// x32-like alias.
const (
	auditArchNative   = 0xc00000b7 // AUDIT_ARCH_AARCH64
	auditArchCompat   = 0x40000028 // AUDIT_ARCH_ARM
	x32Bit            = 0
	sysSeccomp        = 277
	sysProcessVMReadv = 270
	sysIoctlNative    = 29
	sysIoctlCompat    = 54
)

// nativeCalls are the AArch64 metadata calls the guard serves.
func nativeCalls() []nativeCall {
	return []nativeCall{
		{52, callFchmod}, {53, callFchmodat}, {sysFchmodat2, callFchmodat2},
		{55, callFchown}, {54, callFchownat}, {88, callUtimensat},
		{5, callSetxattr}, {6, callLsetxattr}, {7, callFsetxattr},
		{14, callRemovexattr}, {15, callLremovexattr}, {16, callFremovexattr},
	}
}

// compatCalls are the 32-bit arm metadata calls, all refused: chmod,
// lchown, utime, fchmod, fchown, chown, lchown32, fchown32, chown32, the
// six extended-attribute calls, utimes, fchownat, futimesat, fchmodat,
// utimensat, utimensat_time64 and the unified-table extras.
func compatCalls() []uint32 {
	return []uint32{15, 16, 30, 94, 95, 182, 198, 207, 212, 226, 227, 228, 235, 236, 237,
		269, 325, 326, 333, 348, 412, sysFchmodat2, sysSetxattrat, sysRemovexattat, sysFileSetattr}
}
