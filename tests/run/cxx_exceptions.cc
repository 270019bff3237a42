// C++ exceptions inside main, under preemption:
//   - thrown at the bottom of a deep recursion (frames own std::string and
//     std::vector objects and RAII counters), caught at the top, many times;
//     every destructor runs exactly once;
//   - rethrow, nested try blocks, std::function frames, exceptions in threads;
//   - thrown from a qsort comparator through libc's qsort (where a deferred
//     deadline arms a return trap on qsort's frame) and caught outside;
//   - `cxx_exceptions uncaught`: an exception nobody catches -> std::terminate
//     prints the usual message and the process dies of SIGABRT;
//   - `cxx_exceptions noexcept`: thrown through a noexcept function -> same;
//   - `cxx_exceptions terminate_handler`: uncaught, with a std::set_terminate
//     handler (crash reporters install one) that reports and exits with 17.
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common.h"

static long live, constructed, destroyed;
static volatile uint64_t sink;

struct Guard {
    std::string name;
    Guard(int d) : name("frame " + std::to_string(d)) {
        live++;
        constructed++;
    }
    ~Guard() {
        live--;
        destroyed++;
    }
};

struct DeepError : std::runtime_error {
    int depth;
    DeepError(int d) : std::runtime_error("deep error at " + std::to_string(d)), depth(d) {}
};

static int dive(int depth, int target) {
    Guard g(depth);
    std::vector<int> v(static_cast<size_t>(depth % 7 + 1), depth);
    sink += mix(200, static_cast<uint64_t>(depth));
    if (depth == target) {
        if (target % 3 == 0) throw DeepError(depth);
        if (target % 3 == 1) throw std::string("string at ") + std::to_string(depth);
        throw depth;
    }
    if (depth % 50 == 25) {
        try {
            return dive(depth + 1, target) + v[0];
        } catch (const DeepError &e) {
            throw;  // rethrow through a nested try
        }
    }
    std::function<int(int)> next = [&](int d) { return dive(d, target); };
    return next(depth + 1) + static_cast<int>(v.size());
}

static int run_one(int i) {
    int target = 20 + i % 180;
    try {
        dive(0, target);
    } catch (const DeepError &e) {
        CHECK(e.depth == target, "DeepError from depth %d, expected %d", e.depth, target);
        return 0;
    } catch (const std::string &s) {
        CHECK(s == "string at " + std::to_string(target), "string exception '%s'", s.c_str());
        return 1;
    } catch (int d) {
        CHECK(d == target, "int exception %d", d);
        return 2;
    }
    CHECK(false, "nothing thrown");
    return -1;
}

static void may_throw(int d) {
    if (d == 0) throw std::logic_error("boom");
    may_throw(d - 1);
}
static void no_throw(int d) noexcept { may_throw(d); }

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "caught";
    if (!strcmp(mode, "uncaught")) {
        std::printf("throwing without a handler\n");
        std::fflush(stdout);
        sink += mix(2000000, 1);
        may_throw(100);
        return 0;
    }
    if (!strcmp(mode, "terminate_handler")) {
        std::set_terminate([] {
            std::fprintf(stderr, "terminate handler called\n");
            std::fflush(nullptr);
            _exit(17);
        });
        std::printf("throwing without a handler, terminate handler installed\n");
        std::fflush(stdout);
        sink += mix(2000000, 3);
        may_throw(100);
        return 0;
    }
    if (!strcmp(mode, "noexcept")) {
        std::printf("throwing through noexcept\n");
        std::fflush(stdout);
        sink += mix(2000000, 2);
        no_throw(100);
        return 0;
    }
    int n = iters(2000);
    int kinds[3] = {0, 0, 0};
    for (int i = 0; i < n; i++) kinds[run_one(i)]++;
    CHECK(live == 0 && constructed == destroyed, "destructors: %ld constructed, %ld destroyed", constructed, destroyed);
    std::printf("caught %d DeepError, %d string, %d int; %ld frames unwound\n", kinds[0], kinds[1], kinds[2], destroyed);

    // exceptions in threads, concurrently with main
    std::vector<std::thread> ts;
    std::vector<int> results(4, 0);
    for (int k = 0; k < 4; k++)
        ts.emplace_back([k, &results, n] {
            int c = 0;
            for (int i = 0; i < n / 10; i++) {
                try {
                    may_throw(10 + (i + k) % 40);
                } catch (const std::logic_error &) {
                    c++;
                }
            }
            results[static_cast<size_t>(k)] = c;
        });
    int mine = 0;
    for (int i = 0; i < n / 4; i++) {
        try {
            may_throw(30 + i % 70);
        } catch (const std::exception &e) {
            mine += std::strcmp(e.what(), "boom") == 0;
        }
    }
    for (auto &t : ts) t.join();
    for (int k = 0; k < 4; k++) CHECK(results[static_cast<size_t>(k)] == n / 10, "thread %d caught %d", k, results[static_cast<size_t>(k)]);
    CHECK(mine == n / 4, "main caught %d", mine);
    std::printf("threads: ok\n");

    // through libc: qsort's frame may carry a return trap when the exception
    // passes; the unwinder must find the real return address through it
    int thrown = 0;
    for (int i = 0; i < n / 4; i++) {
        std::vector<int> v(3000);
        for (size_t k = 0; k < v.size(); k++) v[k] = static_cast<int>((k * 7919) % v.size());
        static int calls;
        calls = 0;
        try {
            std::qsort(v.data(), v.size(), sizeof(int), [](const void *a, const void *b) -> int {
                if (++calls == 20000) throw std::out_of_range("from qsort");
                sink += mix(20, calls);
                int x = *static_cast<const int *>(a), y = *static_cast<const int *>(b);
                return (x > y) - (x < y);
            });
        } catch (const std::out_of_range &) {
            thrown++;
        }
    }
    CHECK(thrown == n / 4, "caught %d of %d exceptions thrown through qsort", thrown, n / 4);
    std::printf("through qsort: ok\n");
    return 0;
}
