/* ascend-sim: the OS identity a simulated node reports through the C library (see ../osident.py).
 *
 * Loaded into every dynamically linked process of the node by /etc/ld.so.preload. It answers, from
 * /etc/ascend-sim/os-identity, what a process asks glibc about the system it runs on:
 *   uname(2)             release and version (`uname -r`, Python's os.uname() and platform.release(),
 *                        so Ansible's ansible_kernel / ansible_kernel_version)
 *   confstr(3)           _CS_GNU_LIBC_VERSION (`getconf GNU_LIBC_VERSION`, Python's os.confstr, which
 *                        pip's and packaging's manylinux check read first)
 *   gnu_get_libc_version(3)  (packaging's ctypes fallback, `python -c 'import platform; ...'`)
 * Every other call goes to the real glibc, and so does a value the file does not set. Statically linked
 * programs and raw syscalls still see the host kernel; /proc/version and /proc/sys/kernel/osrelease too.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#define IDENTITY "/etc/ascend-sim/os-identity"

static char glibc[32];            /* "2.17" */
static char glibc_line[40];       /* "glibc 2.17" */
static char release[_UTSNAME_RELEASE_LENGTH];
static char version[_UTSNAME_VERSION_LENGTH];

static void take(char *dst, size_t size, const char *src, size_t len) {
    if (len >= size) len = size - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

/* "glibc 2.17\nrelease 3.10.0-957.el7.x86_64\nversion #1 SMP ...\n" */
__attribute__((constructor)) static void load(void) {
    char buf[1024];
    int fd = open(IDENTITY, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return;
    buf[n] = '\0';
    for (char *line = buf, *end; *line; line = end) {
        end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        end = end ? end + 1 : line + len;
        char *sp = memchr(line, ' ', len);
        if (!sp) continue;
        size_t klen = (size_t)(sp - line), vlen = len - klen - 1;
        const char *val = sp + 1;
        if (klen == 5 && !memcmp(line, "glibc", 5)) {
            take(glibc, sizeof glibc, val, vlen);
            memcpy(glibc_line, "glibc ", 6);
            take(glibc_line + 6, sizeof glibc_line - 6, val, vlen);
        } else if (klen == 7 && !memcmp(line, "release", 7)) {
            take(release, sizeof release, val, vlen);
        } else if (klen == 7 && !memcmp(line, "version", 7)) {
            take(version, sizeof version, val, vlen);
        }
    }
}

int uname(struct utsname *buf) {
    static int (*real)(struct utsname *);
    if (!real) real = (int (*)(struct utsname *))dlsym(RTLD_NEXT, "uname");
    int rc = real(buf);
    if (rc == 0) {
        if (release[0]) strcpy(buf->release, release);
        if (version[0]) strcpy(buf->version, version);
    }
    return rc;
}

size_t confstr(int name, char *buf, size_t len) {
    static size_t (*real)(int, char *, size_t);
    if (name == _CS_GNU_LIBC_VERSION && glibc_line[0]) {
        size_t need = strlen(glibc_line) + 1;
        if (buf && len) take(buf, len, glibc_line, need - 1);
        return need;
    }
    if (!real) real = (size_t (*)(int, char *, size_t))dlsym(RTLD_NEXT, "confstr");
    return real(name, buf, len);
}

const char *gnu_get_libc_version(void) {
    static const char *(*real)(void);
    if (glibc[0]) return glibc;
    if (!real) real = (const char *(*)(void))dlsym(RTLD_NEXT, "gnu_get_libc_version");
    return real();
}
