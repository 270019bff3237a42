/* Calls zlib once; built with the PLT (a JUMP_SLOT), with -z now, and with
 * -fno-plt (a GLOB_DAT slot, as every Rust call into a C library). */
#include <stdio.h>
#include <zlib.h>
int main(void) {
    printf("%s\n", zlibVersion());
    return 0;
}
