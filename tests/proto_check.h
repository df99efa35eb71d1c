/* proto_check.h: what every schema test of the project does to protobuf-c
 * messages, shared by tests/test_proto.c (the bridge's schemas, proto/) and
 * each built-in grain's test_<name>_proto.c (its own .proto, in its folder).
 *
 * The including file includes cmocka.h (and what it needs) and defines,
 * before including this header, its table of every message type of its
 * schemas:
 *
 *     static const ProtobufCMessageDescriptor *const all_descriptors[] = {...};
 *     #define N_DESCRIPTORS (sizeof all_descriptors / sizeof all_descriptors[0])
 *
 * ROUND_TRIP packs a message with its typed *__pack, unpacks it with
 * *__unpack (the caller compares the fields and frees it), and also
 *   - repacks the decoded message and expects the very same bytes,
 *   - decodes every prefix of the encoding from an exactly sized heap copy
 *     (so ASan sees any over-read) and expects the one-byte-short prefix to
 *     fail: the last byte always belongs to the last field,
 *   - decodes byte-flipped copies, which must either fail or free cleanly.
 * pc_garbage_refused, pc_random_garbage (a cmocka test itself) and
 * pc_check_covered run the checks that hold for every message type of the
 * table. */
#ifndef GB_TESTS_PROTO_CHECK_H
#define GB_TESTS_PROTO_CHECK_H

#ifndef N_DESCRIPTORS
#error "define all_descriptors and N_DESCRIPTORS before including proto_check.h (after cmocka.h)"
#endif

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

/* Which descriptors went through ROUND_TRIP (tests run in order, in one
 * process; pc_check_covered, last, checks that all did). */
static int round_tripped[N_DESCRIPTORS];

static inline void note_round_trip(const ProtobufCMessageDescriptor *d)
{
    for (size_t i = 0; i < N_DESCRIPTORS; i++) {
        if (all_descriptors[i] == d) {
            round_tripped[i] = 1;
            return;
        }
    }
    fail_msg("%s is missing from all_descriptors", d->name);
}

/* Decodes len bytes of data from an exactly sized heap copy: any read past
 * the end is a heap overflow that ASan reports. */
static inline ProtobufCMessage *unpack_exact(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t len)
{
    static const uint8_t nothing[1];
    if (len == 0)
        return protobuf_c_message_unpack(d, NULL, 0, nothing);
    uint8_t *copy = malloc(len);
    assert_non_null(copy);
    memcpy(copy, data, len);
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, copy);
    free(copy);
    return m;
}

/* Packing the decoded message again gives the same bytes. */
static inline void check_repack(const ProtobufCMessage *m, const uint8_t *want, size_t n)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    assert_int_equal(len, n);
    uint8_t *buf = malloc(len + 1);
    assert_non_null(buf);
    assert_int_equal(protobuf_c_message_pack(m, buf), len);
    if (len > 0)
        assert_memory_equal(buf, want, len);
    free(buf);
}

/* Every prefix decodes or fails without harm; the prefix one byte short always
 * fails. Long encodings are sampled (about 1000 cuts plus the last 64). */
static inline void check_truncations(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t n)
{
    size_t stride = n > 2048 ? n / 1024 : 1;
    for (size_t k = 0; k < n; k++) {
        if (k % stride != 0 && k + 64 < n)
            continue;
        ProtobufCMessage *m = unpack_exact(d, buf, k);
        if (k + 1 == n && m != NULL)
            fail_msg("%s: %zu of %zu bytes decoded", d->name, k, n);
        if (m)
            protobuf_c_message_free_unpacked(m, NULL);
    }
}

/* Single-byte corruptions of the first 256 bytes: decode or fail, never crash
 * or leak. */
static inline void check_mutations(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t n)
{
    static const uint8_t xors[] = {0xFF, 0x80, 0x01, 0x07};
    size_t lim = n < 256 ? n : 256;
    uint8_t *copy = malloc(n + 1);
    assert_non_null(copy);
    for (size_t i = 0; i < lim; i++) {
        for (size_t x = 0; x < sizeof xors; x++) {
            memcpy(copy, buf, n);
            copy[i] ^= xors[x];
            ProtobufCMessage *m = unpack_exact(d, copy, n);
            if (m)
                protobuf_c_message_free_unpacked(m, NULL);
        }
    }
    free(copy);
}

/* Packs *in with prefix##__pack, decodes with prefix##__unpack into out (the
 * caller compares and frees it with prefix##__free_unpacked), and runs the
 * generic checks above on the encoding. */
#define ROUND_TRIP(prefix, in, out)                                                 \
    do {                                                                            \
        size_t rt_len = prefix##__get_packed_size(in);                              \
        uint8_t *rt_buf = malloc(rt_len + 1);                                       \
        assert_non_null(rt_buf);                                                    \
        assert_int_equal(prefix##__pack((in), rt_buf), rt_len);                     \
        (out) = prefix##__unpack(NULL, rt_len, rt_buf);                             \
        assert_non_null(out);                                                       \
        assert_true(protobuf_c_message_check(&(out)->base));                        \
        check_repack(&(out)->base, rt_buf, rt_len);                                 \
        check_truncations((in)->base.descriptor, rt_buf, rt_len);                   \
        check_mutations((in)->base.descriptor, rt_buf, rt_len);                     \
        note_round_trip((in)->base.descriptor);                                     \
        free(rt_buf);                                                               \
    } while (0)

/* Packs m into a new buffer (free it); *len gets the size. */
static inline uint8_t *pack_new(const ProtobufCMessage *m, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(*len + 1);
    assert_non_null(buf);
    assert_int_equal(protobuf_c_message_pack(m, buf), *len);
    return buf;
}

/* ------------------------------------------------------------------------ */
/* Field comparisons.                                                        */

static inline const char *str_or_empty(const char *s) { return s ? s : ""; }

static inline void assert_str_eq(const char *a, const char *b)
{
    assert_string_equal(str_or_empty(a), str_or_empty(b));
}

static inline void assert_bytes_eq(ProtobufCBinaryData a, ProtobufCBinaryData b)
{
    assert_int_equal(a.len, b.len);
    if (a.len > 0)
        assert_memory_equal(a.data, b.data, a.len);
}

/* Bitwise, so NaN payloads and -0.0 count. */
static inline void assert_floats_eq(const float *a, size_t na, const float *b, size_t nb)
{
    assert_int_equal(na, nb);
    if (na > 0)
        assert_memory_equal(a, b, na * sizeof *a);
}

static inline void assert_doubles_eq(const double *a, size_t na, const double *b, size_t nb)
{
    assert_int_equal(na, nb);
    if (na > 0)
        assert_memory_equal(a, b, na * sizeof *a);
}

static inline void assert_double_bits(double a, double b) { assert_doubles_eq(&a, 1, &b, 1); }

static inline void assert_u64s_eq(const uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
    assert_int_equal(na, nb);
    if (na > 0)
        assert_memory_equal(a, b, na * sizeof *a);
}

static inline void assert_u32s_eq(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
    assert_int_equal(na, nb);
    if (na > 0)
        assert_memory_equal(a, b, na * sizeof *a);
}

/* Hand-made malformed encodings that every decoder of the table must refuse. */
static inline void pc_garbage_refused(void)
{
    static const struct {
        const char *what;
        uint8_t bytes[16];
        size_t len;
    } any[] = {
        {"wire type 7", {0x0F}, 1},
        {"wire type 6", {0x0E}, 1},
        {"group (wire type 3)", {0x4B, 0x4C}, 2},
        {"field number 0", {0x00, 0x01}, 2},
        {"tag varint of 11 bytes", {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}, 11},
        {"tag only", {0x08}, 1},
        {"unterminated varint", {0x08, 0x80}, 2},
        {"length past the end", {0x0A, 0x05, 'a'}, 3},
        {"length 2^63", {0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F}, 10},
        {"fixed64 cut short", {0x09, 1, 2, 3}, 4},
        {"fixed32 cut short", {0x0D, 1, 2}, 3},
        {"unknown field, length past the end", {0xFA, 0x3F, 0x10, 1, 2}, 5},
    };
    for (size_t d = 0; d < N_DESCRIPTORS; d++) {
        for (size_t i = 0; i < sizeof any / sizeof any[0]; i++) {
            ProtobufCMessage *m = unpack_exact(all_descriptors[d], any[i].bytes, any[i].len);
            if (m) {
                protobuf_c_message_free_unpacked(m, NULL);
                fail_msg("%s decoded \"%s\"", all_descriptors[d]->name, any[i].what);
            }
        }
    }
}

static inline uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Random bytes into every decoder of the table: any result, no crash, no
 * leak. A cmocka test as it stands (cmocka_unit_test(pc_random_garbage)). */
static inline void pc_random_garbage(void **state)
{
    (void)state;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    uint8_t buf[96];
    size_t decoded = 0, refused = 0;
    for (size_t d = 0; d < N_DESCRIPTORS; d++) {
        for (int round = 0; round < 2000; round++) {
            size_t len = (size_t)(xorshift(&x) % sizeof buf);
            for (size_t i = 0; i < len; i++) {
                uint64_t r = xorshift(&x);
                buf[i] = (uint8_t)(r >> 24);
                /* Small field numbers with valid wire types now and then, so
                 * the decoders get past the first tag. */
                if (i == 0 && (r & 1))
                    buf[i] = (uint8_t)((((r >> 8) % 8 + 1) << 3) | ((r >> 16) % 3));
            }
            ProtobufCMessage *m = unpack_exact(all_descriptors[d], buf, len);
            if (m) {
                decoded++;
                protobuf_c_message_free_unpacked(m, NULL);
            } else {
                refused++;
            }
        }
    }
    assert_true(refused > 0);
    print_message("random garbage: %zu decoded, %zu refused\n", decoded, refused);
}

/* Counts the `message X` lines of the .proto files in dir (nested ones
 * included) and fails on one that is not in all_descriptors. */
static inline size_t messages_of_dir(const char *dir)
{
    DIR *dp = opendir(dir);
    if (dp == NULL)
        return 0;
    size_t messages = 0;
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        size_t n = strlen(de->d_name);
        if (n < 7 || strcmp(de->d_name + n - 6, ".proto") != 0)
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        char line[512];
        while (fgets(line, sizeof line, f)) {
            char name[128];
            if (sscanf(line, " message %127[A-Za-z0-9_]", name) != 1)
                continue;
            messages++;
            int found = 0;
            for (size_t i = 0; i < N_DESCRIPTORS; i++)
                found |= strcmp(all_descriptors[i]->short_name, name) == 0;
            if (!found)
                fail_msg("%s: message %s has no round-trip test", path, name);
        }
        fclose(f);
    }
    closedir(dp);
    return messages;
}

/* Every descriptor of the table went through ROUND_TRIP, and the `message`
 * lines of the .proto files in the folders dirs (relative to the source
 * tree, GB_SOURCE_DIR) are exactly the table's. */
static inline void pc_check_covered(const char *const *dirs, size_t n_dirs)
{
    for (size_t i = 0; i < N_DESCRIPTORS; i++) {
        if (!round_tripped[i])
            fail_msg("%s was never round-tripped", all_descriptors[i]->name);
    }
    const char *src = getenv("GB_SOURCE_DIR");
    if (src == NULL) {
        print_message("GB_SOURCE_DIR unset: schema coverage not checked\n");
        return;
    }
    size_t messages = 0;
    for (size_t k = 0; k < n_dirs; k++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/%s", src, dirs[k]);
        size_t m = messages_of_dir(dir);
        if (m == 0)
            fail_msg("%s: no message in any .proto file", dir);
        messages += m;
    }
    assert_int_equal(messages, N_DESCRIPTORS);
}

#endif
