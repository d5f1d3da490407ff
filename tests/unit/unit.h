/*
 * unit.h - the smallest test harness that does the job.
 *
 * A test file defines tests with UNIT_TEST(name) and lists them in
 * UNIT_MAIN(...).  CHECK records a failure with file and line and goes on;
 * the run ends with "N passed, N failed" and exits non-zero on any failure.
 */
#ifndef CN_TESTS_UNIT_H
#define CN_TESTS_UNIT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

extern int unit_failures; /* CHECK failures in the current test */

void unit_fail(const char *file, int line, const char *expr);
int unit_run(const char *prog, const char *const *names,
             void (*const *fns)(void), int n, int argc, char **argv);
/* Fresh empty directory under $TMPDIR for a test; caller owns the path. */
char *unit_tmpdir(const char *tag);
void unit_rmtree(const char *path);

#define CHECK(expr)                                                      \
    do {                                                                 \
        if (!(expr))                                                     \
            unit_fail(__FILE__, __LINE__, #expr);                        \
    } while (0)

#define CHECK_EQ(a, b)                                                   \
    do {                                                                 \
        long long unit_a_ = (long long)(a), unit_b_ = (long long)(b);    \
        if (unit_a_ != unit_b_) {                                        \
            fprintf(stderr, "  %s = %lld, %s = %lld\n", #a, unit_a_, #b, \
                    unit_b_);                                            \
            unit_fail(__FILE__, __LINE__, #a " == " #b);                 \
        }                                                                \
    } while (0)

#define UNIT_TEST(name) static void name(void)

#define UNIT_MAIN(...)                                                   \
    int main(int argc, char **argv)                                      \
    {                                                                    \
        static void (*const fns[])(void) = {__VA_ARGS__};                \
        static const char *const names[] = {UNIT_NAMES_(__VA_ARGS__)};   \
        return unit_run(argv[0], names, fns,                             \
                        (int)(sizeof fns / sizeof fns[0]), argc, argv);  \
    }

/* Stringify up to 64 test names. */
#define UNIT_STR_(x) #x,
#define UNIT_NAMES_(...) UNIT_FE_(UNIT_STR_, __VA_ARGS__)
#define UNIT_FE_(m, ...) UNIT_FE_N_(__VA_ARGS__, UNIT_FE_SEQ_)(m, __VA_ARGS__)
#define UNIT_FE_N_(...) UNIT_FE_ARG_(__VA_ARGS__)
#define UNIT_FE_ARG_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, \
                     _14, _15, _16, _17, _18, _19, _20, _21, _22, _23, _24,  \
                     _25, _26, _27, _28, _29, _30, _31, _32, _33, _34, _35,  \
                     _36, _37, _38, _39, _40, _41, _42, _43, _44, _45, _46,  \
                     _47, _48, _49, _50, _51, _52, _53, _54, _55, _56, _57,  \
                     _58, _59, _60, _61, _62, _63, _64, N, ...)              \
    UNIT_FE_##N
#define UNIT_FE_SEQ_                                                         \
    64, 63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47,  \
        46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30,  \
        29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13,  \
        12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1
#define UNIT_FE_1(m, x) m(x)
#define UNIT_FE_2(m, x, ...) m(x) UNIT_FE_1(m, __VA_ARGS__)
#define UNIT_FE_3(m, x, ...) m(x) UNIT_FE_2(m, __VA_ARGS__)
#define UNIT_FE_4(m, x, ...) m(x) UNIT_FE_3(m, __VA_ARGS__)
#define UNIT_FE_5(m, x, ...) m(x) UNIT_FE_4(m, __VA_ARGS__)
#define UNIT_FE_6(m, x, ...) m(x) UNIT_FE_5(m, __VA_ARGS__)
#define UNIT_FE_7(m, x, ...) m(x) UNIT_FE_6(m, __VA_ARGS__)
#define UNIT_FE_8(m, x, ...) m(x) UNIT_FE_7(m, __VA_ARGS__)
#define UNIT_FE_9(m, x, ...) m(x) UNIT_FE_8(m, __VA_ARGS__)
#define UNIT_FE_10(m, x, ...) m(x) UNIT_FE_9(m, __VA_ARGS__)
#define UNIT_FE_11(m, x, ...) m(x) UNIT_FE_10(m, __VA_ARGS__)
#define UNIT_FE_12(m, x, ...) m(x) UNIT_FE_11(m, __VA_ARGS__)
#define UNIT_FE_13(m, x, ...) m(x) UNIT_FE_12(m, __VA_ARGS__)
#define UNIT_FE_14(m, x, ...) m(x) UNIT_FE_13(m, __VA_ARGS__)
#define UNIT_FE_15(m, x, ...) m(x) UNIT_FE_14(m, __VA_ARGS__)
#define UNIT_FE_16(m, x, ...) m(x) UNIT_FE_15(m, __VA_ARGS__)
#define UNIT_FE_17(m, x, ...) m(x) UNIT_FE_16(m, __VA_ARGS__)
#define UNIT_FE_18(m, x, ...) m(x) UNIT_FE_17(m, __VA_ARGS__)
#define UNIT_FE_19(m, x, ...) m(x) UNIT_FE_18(m, __VA_ARGS__)
#define UNIT_FE_20(m, x, ...) m(x) UNIT_FE_19(m, __VA_ARGS__)
#define UNIT_FE_21(m, x, ...) m(x) UNIT_FE_20(m, __VA_ARGS__)
#define UNIT_FE_22(m, x, ...) m(x) UNIT_FE_21(m, __VA_ARGS__)
#define UNIT_FE_23(m, x, ...) m(x) UNIT_FE_22(m, __VA_ARGS__)
#define UNIT_FE_24(m, x, ...) m(x) UNIT_FE_23(m, __VA_ARGS__)
#define UNIT_FE_25(m, x, ...) m(x) UNIT_FE_24(m, __VA_ARGS__)
#define UNIT_FE_26(m, x, ...) m(x) UNIT_FE_25(m, __VA_ARGS__)
#define UNIT_FE_27(m, x, ...) m(x) UNIT_FE_26(m, __VA_ARGS__)
#define UNIT_FE_28(m, x, ...) m(x) UNIT_FE_27(m, __VA_ARGS__)
#define UNIT_FE_29(m, x, ...) m(x) UNIT_FE_28(m, __VA_ARGS__)
#define UNIT_FE_30(m, x, ...) m(x) UNIT_FE_29(m, __VA_ARGS__)
#define UNIT_FE_31(m, x, ...) m(x) UNIT_FE_30(m, __VA_ARGS__)
#define UNIT_FE_32(m, x, ...) m(x) UNIT_FE_31(m, __VA_ARGS__)
#define UNIT_FE_33(m, x, ...) m(x) UNIT_FE_32(m, __VA_ARGS__)
#define UNIT_FE_34(m, x, ...) m(x) UNIT_FE_33(m, __VA_ARGS__)
#define UNIT_FE_35(m, x, ...) m(x) UNIT_FE_34(m, __VA_ARGS__)
#define UNIT_FE_36(m, x, ...) m(x) UNIT_FE_35(m, __VA_ARGS__)
#define UNIT_FE_37(m, x, ...) m(x) UNIT_FE_36(m, __VA_ARGS__)
#define UNIT_FE_38(m, x, ...) m(x) UNIT_FE_37(m, __VA_ARGS__)
#define UNIT_FE_39(m, x, ...) m(x) UNIT_FE_38(m, __VA_ARGS__)
#define UNIT_FE_40(m, x, ...) m(x) UNIT_FE_39(m, __VA_ARGS__)
#define UNIT_FE_41(m, x, ...) m(x) UNIT_FE_40(m, __VA_ARGS__)
#define UNIT_FE_42(m, x, ...) m(x) UNIT_FE_41(m, __VA_ARGS__)
#define UNIT_FE_43(m, x, ...) m(x) UNIT_FE_42(m, __VA_ARGS__)
#define UNIT_FE_44(m, x, ...) m(x) UNIT_FE_43(m, __VA_ARGS__)
#define UNIT_FE_45(m, x, ...) m(x) UNIT_FE_44(m, __VA_ARGS__)
#define UNIT_FE_46(m, x, ...) m(x) UNIT_FE_45(m, __VA_ARGS__)
#define UNIT_FE_47(m, x, ...) m(x) UNIT_FE_46(m, __VA_ARGS__)
#define UNIT_FE_48(m, x, ...) m(x) UNIT_FE_47(m, __VA_ARGS__)
#define UNIT_FE_49(m, x, ...) m(x) UNIT_FE_48(m, __VA_ARGS__)
#define UNIT_FE_50(m, x, ...) m(x) UNIT_FE_49(m, __VA_ARGS__)
#define UNIT_FE_51(m, x, ...) m(x) UNIT_FE_50(m, __VA_ARGS__)
#define UNIT_FE_52(m, x, ...) m(x) UNIT_FE_51(m, __VA_ARGS__)
#define UNIT_FE_53(m, x, ...) m(x) UNIT_FE_52(m, __VA_ARGS__)
#define UNIT_FE_54(m, x, ...) m(x) UNIT_FE_53(m, __VA_ARGS__)
#define UNIT_FE_55(m, x, ...) m(x) UNIT_FE_54(m, __VA_ARGS__)
#define UNIT_FE_56(m, x, ...) m(x) UNIT_FE_55(m, __VA_ARGS__)
#define UNIT_FE_57(m, x, ...) m(x) UNIT_FE_56(m, __VA_ARGS__)
#define UNIT_FE_58(m, x, ...) m(x) UNIT_FE_57(m, __VA_ARGS__)
#define UNIT_FE_59(m, x, ...) m(x) UNIT_FE_58(m, __VA_ARGS__)
#define UNIT_FE_60(m, x, ...) m(x) UNIT_FE_59(m, __VA_ARGS__)
#define UNIT_FE_61(m, x, ...) m(x) UNIT_FE_60(m, __VA_ARGS__)
#define UNIT_FE_62(m, x, ...) m(x) UNIT_FE_61(m, __VA_ARGS__)
#define UNIT_FE_63(m, x, ...) m(x) UNIT_FE_62(m, __VA_ARGS__)
#define UNIT_FE_64(m, x, ...) m(x) UNIT_FE_63(m, __VA_ARGS__)

#endif
