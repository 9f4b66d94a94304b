package sandbox

// The amd64 numbers: native x86-64, compat i386 (int 0x80 reaches it from
// any 64-bit program), and x32 (the native architecture with bit 30 set in
// the number).
const (
	auditArchNative   = 0xc000003e // AUDIT_ARCH_X86_64
	auditArchCompat   = 0x40000003 // AUDIT_ARCH_I386
	x32Bit            = 0x40000000 // __X32_SYSCALL_BIT
	sysSeccomp        = 317
	sysProcessVMReadv = 310
	sysSocket         = 41
	sysSocketpair     = 53
	sysConnect        = 42
	sysSendto         = 44
	sysSendmsg        = 46
	sysSendmmsg       = 307
	sysIoctlNative    = 16
)

// nativeCalls are the x86-64 metadata calls the guard serves.
var nativeCalls = [...]nativeCall{
	{90, callChmod}, {91, callFchmod}, {268, callFchmodat}, {sysFchmodat2, callFchmodat2},
	{92, callChown}, {94, callLchown}, {93, callFchown}, {260, callFchownat},
	{132, callUtime}, {235, callUtimes}, {261, callFutimesat}, {280, callUtimensat},
	{188, callSetxattr}, {189, callLsetxattr}, {190, callFsetxattr},
	{197, callRemovexattr}, {198, callLremovexattr}, {199, callFremovexattr},
}
