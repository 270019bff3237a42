/*
 * Library facilities that load code or data at run time, or call back into
 * the program, work inside a preemptible main, many times, with the same
 * results as a plain run:
 *   setlocale + strcoll/strxfrm/mbstowcs/wcstombs/mbrtowc; iconv (UTF-8 <->
 *   ISO-8859-1 and UTF-16LE; loads gconv modules); getaddrinfo/getnameinfo on
 *   numeric addresses; dlopen/dlsym/dlclose of libm.so.6 and of a small
 *   library built by the runner (libplugin.so next to this binary) whose code
 *   does CPU work and calls back into the program; qsort with a comparator;
 *   regcomp/regexec; strtod/printf round trips.
 */
#include "common.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <iconv.h>
#include <libgen.h>
#include <locale.h>
#include <math.h>
#include <netdb.h>
#include <regex.h>
#include <wchar.h>
#include <wctype.h>

static volatile uint64_t sink;

static const char *const utf8_text = "h\xc3\xa9llo w\xc3\xb6rld \xc3\x84pfel \xc3\x9f";
/* the same text in ISO-8859-1 */
static const char latin1_text[] = "h\xe9llo w\xf6rld \xc4pfel \xdf";

static int cmp_coll(const void *a, const void *b) { return strcoll(*(const char *const *)a, *(const char *const *)b); }

static void test_locale(int n) {
    const char *l = setlocale(LC_ALL, "C.UTF-8");
    CHECK(l != NULL, "setlocale(C.UTF-8)");
    printf("setlocale: %s\n", l);
    const char *words[] = {"zebra", "\xc3\x84pfel", "apple", "Zoo", "\xc3\xa9t\xc3\xa9", "eta", "banana", "B"};
    size_t nw = sizeof words / sizeof *words;
    for (int i = 0; i < n; i++) {
        const char *w[sizeof words / sizeof *words];
        memcpy(w, words, sizeof words);
        qsort(w, nw, sizeof *w, cmp_coll);
        if (i == 0) {
            printf("strcoll order:");
            for (size_t k = 0; k < nw; k++) printf(" %s", w[k]);
            printf("\n");
        }
        char xf[64];
        CHECK(strxfrm(xf, "\xc3\xa9t\xc3\xa9", sizeof xf) < sizeof xf, "strxfrm");
        wchar_t wbuf[64];
        size_t nwc = mbstowcs(wbuf, utf8_text, 64);
        CHECK(nwc == 19, "mbstowcs converted %zu characters", nwc);
        CHECK(wbuf[1] == 0xe9 && towupper((wint_t)wbuf[1]) == 0xc9, "wide characters");
        char back[128];
        CHECK(wcstombs(back, wbuf, sizeof back) == strlen(utf8_text) && strcmp(back, utf8_text) == 0, "wcstombs round trip");
        mbstate_t st;
        memset(&st, 0, sizeof st);
        const char *p = utf8_text;
        size_t count = 0;
        wchar_t wc;
        size_t k;
        while ((k = mbrtowc(&wc, p, 8, &st)) != 0) {
            CHECK(k != (size_t)-1 && k != (size_t)-2, "mbrtowc");
            p += k;
            count++;
        }
        CHECK(count == 19, "mbrtowc counted %zu", count);
        sink += mix(20000, (uint64_t)i);
    }
    printf("locale: ok x%d\n", n);
}

static size_t conv(const char *to, const char *from, const char *in, size_t inlen, char *out, size_t outlen) {
    iconv_t cd = iconv_open(to, from);
    CHECK(cd != (iconv_t)-1, "iconv_open(%s, %s)", to, from);
    char *ip = (char *)in, *op = out;
    size_t il = inlen, ol = outlen;
    CHECK(iconv(cd, &ip, &il, &op, &ol) != (size_t)-1, "iconv %s -> %s", from, to);
    CHECK(iconv(cd, NULL, NULL, &op, &ol) != (size_t)-1, "iconv flush");
    CHECK(iconv_close(cd) == 0, "iconv_close");
    return outlen - ol;
}

static void test_iconv(int n) {
    size_t u8len = strlen(utf8_text);
    for (int i = 0; i < n; i++) {
        char a[256], b[256];
        size_t la = conv("ISO-8859-1", "UTF-8", utf8_text, u8len, a, sizeof a);
        CHECK(la == sizeof latin1_text - 1 && memcmp(a, latin1_text, la) == 0, "UTF-8 -> ISO-8859-1");
        size_t lb = conv("UTF-8", "ISO-8859-1", a, la, b, sizeof b);
        CHECK(lb == u8len && memcmp(b, utf8_text, lb) == 0, "ISO-8859-1 -> UTF-8");
        size_t l16 = conv("UTF-16LE", "UTF-8", utf8_text, u8len, a, sizeof a);
        CHECK(l16 == 2 * 19 && a[2] == (char)0xe9 && a[3] == 0, "UTF-8 -> UTF-16LE (%zu bytes)", l16);
        lb = conv("UTF-8", "UTF-16LE", a, l16, b, sizeof b);
        CHECK(lb == u8len && memcmp(b, utf8_text, lb) == 0, "UTF-16LE -> UTF-8");
        size_t l16b = conv("UTF-16", "UTF-8", "ab", 2, a, sizeof a); /* with a byte-order mark */
        CHECK(l16b == 6, "UTF-16 with BOM: %zu bytes", l16b);
        sink += mix(20000, (uint64_t)i);
    }
    printf("iconv: ok x%d\n", n);
}

static void test_getaddrinfo(int n) {
    for (int i = 0; i < n; i++) {
        static const char *const hosts[] = {"127.0.0.1", "::1", "192.0.2.33", "2001:db8::5"};
        for (int h = 0; h < 4; h++) {
            struct addrinfo hints, *res = NULL;
            memset(&hints, 0, sizeof hints);
            hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
            hints.ai_socktype = SOCK_STREAM;
            int rc = getaddrinfo(hosts[h], "8080", &hints, &res);
            CHECK(rc == 0, "getaddrinfo(%s): %s", hosts[h], gai_strerror(rc));
            char host[NI_MAXHOST], serv[NI_MAXSERV];
            rc = getnameinfo(res->ai_addr, res->ai_addrlen, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV);
            CHECK(rc == 0 && strcmp(host, hosts[h]) == 0 && strcmp(serv, "8080") == 0, "getnameinfo gave %s %s", host, serv);
            CHECK(res->ai_family == (strchr(hosts[h], ':') ? AF_INET6 : AF_INET), "family");
            freeaddrinfo(res);
            unsigned char bin[16];
            char txt[64];
            int af = strchr(hosts[h], ':') ? AF_INET6 : AF_INET;
            CHECK(inet_pton(af, hosts[h], bin) == 1 && inet_ntop(af, bin, txt, sizeof txt) && strcmp(txt, hosts[h]) == 0, "inet_pton/ntop");
        }
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof hints);
        hints.ai_flags = AI_NUMERICHOST;
        CHECK(getaddrinfo("not-a-number.invalid", NULL, &hints, &res) == EAI_NONAME, "AI_NUMERICHOST with a name");
        sink += mix(20000, (uint64_t)i);
    }
    printf("getaddrinfo/getnameinfo: ok x%d\n", n);
}

static uint64_t local_work(uint64_t n, uint64_t seed) {
    volatile uint64_t acc = seed;
    for (uint64_t i = 0; i < n; i++) acc = acc * 2862933555777941757u + 3037000493u + i;
    return acc;
}
static uint64_t callback(uint64_t i) { return mix(200, i); }

static void test_dlopen(int n) {
    char self[4096], plugin[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(len > 0, "readlink");
    self[len] = 0;
    snprintf(plugin, sizeof plugin, "%s/libplugin.so", dirname(self));
    uint64_t want_work = local_work(1000000, 5);
    uint64_t want_cb = 0;
    for (uint64_t i = 0; i < 2000; i++) want_cb += callback(i);
    for (int i = 0; i < n; i++) {
        void *m = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
        CHECK(m, "dlopen libm.so.6: %s", dlerror());
        double (*c)(double) = (double (*)(double))dlsym(m, "cos");
        CHECK(c && fabs(c(0.5) - 0.8775825618903728) < 1e-15, "dlsym cos");
        CHECK(dlclose(m) == 0, "dlclose libm");

        void *h = dlopen(plugin, (i % 2 ? RTLD_NOW : RTLD_LAZY) | RTLD_LOCAL);
        CHECK(h, "dlopen %s: %s", plugin, dlerror());
        uint64_t (*work)(uint64_t, uint64_t) = (uint64_t(*)(uint64_t, uint64_t))dlsym(h, "plugin_work");
        uint64_t (*cb)(uint64_t (*)(uint64_t), uint64_t) = (uint64_t(*)(uint64_t (*)(uint64_t), uint64_t))dlsym(h, "plugin_callback");
        CHECK(work && cb, "dlsym plugin: %s", dlerror());
        CHECK(work(1000000, 5) == want_work, "plugin computed a wrong result");
        CHECK(cb(callback, 2000) == want_cb, "plugin callback result wrong");
        CHECK(dlclose(h) == 0, "dlclose plugin");
        sink += mix(40000, (uint64_t)i); /* preemptible work of the program's own */
    }
    printf("dlopen/dlsym/dlclose: ok x%d\n", n);
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    sink += mix(20, (uint64_t)x); /* a comparator with some work of its own */
    return (x > y) - (x < y);
}

static void test_misc(int n) {
    int count = 20000;
    int *v = malloc(sizeof(int) * (size_t)count);
    CHECK(v, "malloc");
    for (int i = 0; i < n; i++) {
        uint64_t s = (uint64_t)i + 1;
        for (int k = 0; k < count; k++) {
            s = s * 6364136223846793005u + 1442695040888963407u;
            v[k] = (int)(s >> 33);
        }
        qsort(v, (size_t)count, sizeof *v, cmp_int);
        for (int k = 1; k < count; k++) CHECK(v[k - 1] <= v[k], "qsort result not sorted");
        sink += mix(200000, (uint64_t)i); /* preemptible work between the library calls */
    }
    free(v);
    regex_t re;
    CHECK(regcomp(&re, "^([a-z]+)-([0-9]{2,4})(\\.[a-z]+)?$", REG_EXTENDED) == 0, "regcomp");
    int matches = 0;
    for (int i = 0; i < n * 100; i++) {
        char s[64];
        snprintf(s, sizeof s, i % 3 ? "item-%d.txt" : "Item-%d", i % 20000);
        regmatch_t m[4];
        if (regexec(&re, s, 4, m, 0) == 0) matches++;
    }
    regfree(&re);
    printf("qsort: ok x%d, regexec: %d matches\n", n, matches);
    double vals[] = {0.1, 1.0 / 3, 6.02214076e23, -2.5e-308, 1e308, 3.141592653589793};
    for (int i = 0; i < n * 100; i++) {
        double d = vals[i % 6] * (1 + i % 7);
        char buf[64];
        snprintf(buf, sizeof buf, "%.17g", d);
        CHECK(strtod(buf, NULL) == d, "strtod round trip of %s", buf);
    }
    printf("strtod/printf: %.17g %.6e %a\n", vals[1], vals[2], vals[5]);
}

int main(int argc, char **argv) {
    /* libs [locale|iconv|getaddrinfo|dlopen|misc]: one part (default: all) */
    const char *only = argc > 1 ? argv[1] : "all";
    int all = !strcmp(only, "all"), known = 0;
    int n = iters(60);
    if (all || !strcmp(only, "locale")) test_locale(n), known = 1;
    if (all || !strcmp(only, "iconv")) test_iconv(n), known = 1;
    if (all || !strcmp(only, "getaddrinfo")) test_getaddrinfo(n), known = 1;
    if (all || !strcmp(only, "dlopen")) test_dlopen(iters(40)), known = 1;
    if (all || !strcmp(only, "misc")) test_misc(iters(20)), known = 1;
    CHECK(known, "unknown part %s", only);
    return 0;
}
