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
	sysSocket         = 198
	sysSocketpair     = 199
	sysConnect        = 203
	sysSendto         = 206
	sysSendmsg        = 211
	sysSendmmsg       = 269
	sysIoctlNative    = 29
)

// nativeCalls are the AArch64 metadata calls the guard serves.
var nativeCalls = [...]nativeCall{
	{52, callFchmod}, {53, callFchmodat}, {sysFchmodat2, callFchmodat2},
	{55, callFchown}, {54, callFchownat}, {88, callUtimensat},
	{5, callSetxattr}, {6, callLsetxattr}, {7, callFsetxattr},
	{14, callRemovexattr}, {15, callLremovexattr}, {16, callFremovexattr},
}
