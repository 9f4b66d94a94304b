package install

// sysRenameat2 is the renameat2 system call number on linux/amd64.
const sysRenameat2 = 316
