/* An LD_AUDIT module that reports the bindings la_symbind64 sees (for
 * tests/audit_route.rs: why gotcha rewrites GOT slots instead). */
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <stdint.h>
unsigned la_version(unsigned v) { return v < LAV_CURRENT ? v : LAV_CURRENT; }
unsigned la_objopen(struct link_map *m, Lmid_t l, uintptr_t *c) { (void)m; (void)l; (void)c; return LA_FLG_BINDTO | LA_FLG_BINDFROM; }
uintptr_t la_symbind64(Elf64_Sym *sym, unsigned ndx, uintptr_t *refcook, uintptr_t *defcook, unsigned *flags, const char *name) {
    (void)ndx; (void)refcook; (void)defcook; (void)flags;
    if (strncmp(name, "compress", 8) == 0 || strncmp(name, "uncompress", 10) == 0 || strcmp(name, "zlibVersion") == 0)
        fprintf(stderr, "audit: bound %s\n", name);
    return sym->st_value;
}
