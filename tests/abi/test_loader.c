/* The loader against one fixture per refusal, plus the good fixture that
 * must load (or every refusal test could pass because nothing loads).
 *
 * The fixtures are copied at start into a private temporary directory with
 * mode 0755: the loader refuses group-writable files, and a build made
 * under umask 002 would otherwise make even the good fixture fail. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/loader.h"
#include "services/host_services.h"

static char tmp[TM_PLUGIN_PATH_MAX]; /* the private directory */

typedef struct fixture {
    const char *build_path; /* from CMake: $<TARGET_FILE:...> */
    const char *file;       /* name of the copy in tmp */
    char path[TM_PLUGIN_PATH_MAX];
} fixture;

enum {
    FX_GOOD,
    FX_BAD_MAGIC,
    FX_ABI_MAJOR,
    FX_ABI_MINOR,
    FX_SMALL_STRUCT,
    FX_NULL_COMMIT,
    FX_NULL_ENTRY,
    FX_NULL_NAME,
    FX_NO_ENTRY,
    FX_UNRESOLVED,
    FX_ABI_1_0,
    FX_BAD_SETTINGS,
    FX_SETTINGS_STRIDE,
    NFIXTURES
};

static fixture fixtures[NFIXTURES] = {
    [FX_GOOD] = {FX_GOOD_PATH, "good.so", ""},
    [FX_BAD_MAGIC] = {FX_BAD_MAGIC_PATH, "bad_magic.so", ""},
    [FX_ABI_MAJOR] = {FX_ABI_MAJOR_PATH, "abi_major.so", ""},
    [FX_ABI_MINOR] = {FX_ABI_MINOR_PATH, "abi_minor.so", ""},
    [FX_SMALL_STRUCT] = {FX_SMALL_STRUCT_PATH, "small_struct.so", ""},
    [FX_NULL_COMMIT] = {FX_NULL_COMMIT_PATH, "null_commit.so", ""},
    [FX_NULL_ENTRY] = {FX_NULL_ENTRY_PATH, "null_entry.so", ""},
    [FX_NULL_NAME] = {FX_NULL_NAME_PATH, "null_name.so", ""},
    [FX_NO_ENTRY] = {FX_NO_ENTRY_PATH, "no_entry.so", ""},
    [FX_UNRESOLVED] = {FX_UNRESOLVED_PATH, "unresolved.so", ""},
    [FX_ABI_1_0] = {FX_ABI_1_0_PATH, "abi_1_0.so", ""},
    [FX_BAD_SETTINGS] = {FX_BAD_SETTINGS_PATH, "bad_settings.so", ""},
    [FX_SETTINGS_STRIDE] = {FX_SETTINGS_STRIDE_PATH, "settings_stride.so", ""},
};

/* ---- Set-up helpers (abort the run on failure: no test would mean
 * anything) ------------------------------------------------------------ */

static void die(const char *what, const char *arg) {
    fprintf(stderr, "test_loader: %s %s: %s\n", what, arg, strerror(errno));
    exit(2);
}

/* dir + "/" + name into a TM_PLUGIN_PATH_MAX buffer. */
static void join(char *out, const char *dir, const char *name) {
    int n = snprintf(out, TM_PLUGIN_PATH_MAX, "%s/%s", dir, name);
    if (n < 0 || n >= TM_PLUGIN_PATH_MAX)
        die("path too long", name);
}

/* printf into a TM_ERROR_MAX buffer: the expected messages fit in it. */
static void expect(char *out, const char *fmt, ...) TM_PRINTF(2, 3);
static void expect(char *out, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, TM_ERROR_MAX, fmt, ap);
    va_end(ap);
    ck_assert_msg(n >= 0 && n < TM_ERROR_MAX, "expected text too long");
}

static void tmp_path(char *out, const char *name) {
    join(out, tmp, name);
}

static void copy_file(const char *from, const char *to, mode_t mode) {
    int in = open(from, O_RDONLY);
    if (in < 0)
        die("open", from);
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (out < 0)
        die("create", to);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n)
            die("write", to);
    if (n < 0)
        die("read", from);
    /* fchmod, not open's mode: the umask must not decide the test. */
    if (fchmod(out, mode) != 0)
        die("chmod", to);
    if (close(out) != 0 || close(in) != 0)
        die("close", to);
}

static void write_file(const char *path, const char *text, mode_t mode) {
    FILE *f = fopen(path, "w");
    if (f == NULL || fputs(text, f) == EOF || fclose(f) != 0)
        die("write", path);
    if (chmod(path, mode) != 0)
        die("chmod", path);
}

static void make_dir(const char *path) {
    if (mkdir(path, 0755) != 0)
        die("mkdir", path);
}

static void setup_tmp(void) {
    const char *base = getenv("TMPDIR");
    int n = snprintf(tmp, sizeof tmp, "%s/tm-abi-XXXXXX",
                     base != NULL && base[0] != '\0' ? base : "/tmp");
    if (n < 0 || (size_t)n >= sizeof tmp || mkdtemp(tmp) == NULL)
        die("mkdtemp", tmp);
    for (int i = 0; i < NFIXTURES; i++) {
        tmp_path(fixtures[i].path, fixtures[i].file);
        copy_file(fixtures[i].build_path, fixtures[i].path, 0755);
    }
}

/* The tree under tmp is ours (mkdtemp made it): depth-first removal of
 * what the tests created. Failures are reported, not fatal: the result of
 * the tests stands. */
static void remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d != NULL && (e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char child[TM_PLUGIN_PATH_MAX];
            int n = snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            if (n > 0 && (size_t)n < sizeof child)
                remove_tree(child);
        }
        if (d != NULL)
            (void)closedir(d);
        if (rmdir(path) != 0)
            fprintf(stderr, "test_loader: cannot remove %s\n", path);
        return;
    }
    if (unlink(path) != 0)
        fprintf(stderr, "test_loader: cannot remove %s\n", path);
}

/* ---- Assertions --------------------------------------------------------- */

static char err[TM_ERROR_MAX];

static int load(const char *path, tm_plugin *out) {
    memset(err, 0, sizeof err);
    return tm_plugin_load(path, NULL, 0, out, err, sizeof err);
}

/* The whole message, so that the file, the field and both values are each
 * checked, and that it is one line. */
static void assert_refused(const char *path, const char *fmt_after_path) {
    tm_plugin p = {0};
    ck_assert_int_eq(load(path, &p), -1);
    ck_assert_ptr_null(p.api);
    char want[TM_ERROR_MAX];
    expect(want, "plugin %s: %s", path, fmt_after_path);
    ck_assert_str_eq(err, want);
    ck_assert_ptr_null(strchr(err, '\n'));
}

/* ---- The good fixture --------------------------------------------------- */

START_TEST(good_loads) {
    tm_plugin p = {0};
    ck_assert_msg(load(fixtures[FX_GOOD].path, &p) == 0, "%s", err);
    ck_assert_ptr_nonnull(p.api);
    ck_assert_str_eq(p.api->name, "good");
    ck_assert_str_eq(p.api->version, "1.2.3");
    ck_assert_uint_eq(p.api->abi_major, TM_SINK_ABI_MAJOR);
    ck_assert_uint_eq(p.api->abi_minor, TM_SINK_ABI_MINOR);
    ck_assert_uint_eq(p.api->capabilities, TM_CAP_DEDUP | TM_CAP_UPSERT);
    ck_assert_str_eq(p.path, fixtures[FX_GOOD].path);
}
END_TEST

START_TEST(good_loads_from_build_tree_path) {
    /* The build's own file, when its mode allows (umask 022). */
    struct stat st;
    ck_assert_int_eq(stat(FX_GOOD_PATH, &st), 0);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
        return; /* umask 002 build: covered by mode_group_writable */
    tm_plugin p = {0};
    ck_assert_msg(load(FX_GOOD_PATH, &p) == 0, "%s", err);
    ck_assert_str_eq(p.api->name, "good");
}
END_TEST

START_TEST(good_loads_twice_same_table) {
    tm_plugin a = {0}, b = {0};
    ck_assert_int_eq(load(fixtures[FX_GOOD].path, &a), 0);
    ck_assert_int_eq(load(fixtures[FX_GOOD].path, &b), 0);
    ck_assert_ptr_eq(a.api, b.api); /* the plugin's own table, not a copy */
}
END_TEST

/* ---- One refusal each, in the loader's order ---------------------------- */

START_TEST(refuses_directory) {
    char dir[TM_PLUGIN_PATH_MAX];
    tmp_path(dir, "dir.so");
    make_dir(dir);
    assert_refused(dir, "file type is a directory, expected a regular file");
}
END_TEST

START_TEST(refuses_world_writable) {
    char path[TM_PLUGIN_PATH_MAX];
    tmp_path(path, "world.so");
    copy_file(fixtures[FX_GOOD].build_path, path, 0666);
    assert_refused(path, "mode is 0666, writable by group or others; expected "
                         "no group/other write (chmod go-w)");
}
END_TEST

START_TEST(refuses_group_writable) {
    char path[TM_PLUGIN_PATH_MAX];
    tmp_path(path, "group.so");
    copy_file(fixtures[FX_GOOD].build_path, path, 0775);
    assert_refused(path, "mode is 0775, writable by group or others; expected "
                         "no group/other write (chmod go-w)");
}
END_TEST

START_TEST(refuses_missing_file) {
    char path[TM_PLUGIN_PATH_MAX];
    tmp_path(path, "absent.so");
    assert_refused(path, "cannot open: No such file or directory");
}
END_TEST

START_TEST(refuses_unresolved_symbol) {
    const char *path = fixtures[FX_UNRESOLVED].path;
    tm_plugin p = {0};
    ck_assert_int_eq(load(path, &p), -1);
    char prefix[TM_ERROR_MAX];
    expect(prefix, "plugin %s: cannot load: ", path);
    ck_assert_msg(strncmp(err, prefix, strlen(prefix)) == 0, "%s", err);
    /* The dlerror text, with its leading file name dropped (ours is
     * there already): the symbol is what the reader needs. */
    ck_assert_msg(strstr(err, "undefined symbol") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "tm_fixture_undefined_function") != NULL, "%s",
                  err);
    ck_assert_msg(strstr(err + strlen(prefix), path) == NULL, "%s", err);
}
END_TEST

START_TEST(refuses_not_elf) {
    char path[TM_PLUGIN_PATH_MAX];
    tmp_path(path, "text.so");
    write_file(path,
               "this is not a shared object, only a file named like one\n"
               "with enough bytes to be read as an ELF header and fail.\n",
               0644);
    tm_plugin p = {0};
    ck_assert_int_eq(load(path, &p), -1);
    char prefix[TM_ERROR_MAX];
    expect(prefix, "plugin %s: cannot load: ", path);
    ck_assert_msg(strncmp(err, prefix, strlen(prefix)) == 0, "%s", err);
    ck_assert_ptr_null(strchr(err, '\n'));
}
END_TEST

START_TEST(refuses_missing_entry) {
    assert_refused(fixtures[FX_NO_ENTRY].path,
                   "entry symbol 'tidemark_sink_entry' is missing (not a "
                   "tidemark sink plugin, or built without TM_SINK_DEFINE)");
}
END_TEST

START_TEST(refuses_null_entry) {
    assert_refused(fixtures[FX_NULL_ENTRY].path,
                   "tidemark_sink_entry() returned NULL");
}
END_TEST

START_TEST(refuses_bad_magic) {
    assert_refused(fixtures[FX_BAD_MAGIC].path,
                   "magic is 0xdeadbeef, expected 0x544d534b (\"TMSK\")");
}
END_TEST

START_TEST(refuses_abi_major) {
    assert_refused(fixtures[FX_ABI_MAJOR].path,
                   "abi_major is 2, this host speaks 1");
}
END_TEST

START_TEST(refuses_abi_minor) {
    assert_refused(fixtures[FX_ABI_MINOR].path,
                   "abi_minor is 99, newer than this host's 6 (host speaks "
                   "ABI 1.6)");
}
END_TEST

/* A declared settings table (ABI 1.3) that is wrong is refused at load,
 * naming the entry. */
START_TEST(refuses_bad_settings_table) {
    assert_refused(fixtures[FX_BAD_SETTINGS].path,
                   "settings table: entry 1 (\"create\"): a name declared "
                   "twice");
}
END_TEST

/* A table whose first entry claims a huge struct_size is refused at load
 * (the host strided by it, far past the table, and crashed). */
START_TEST(refuses_settings_table_stride) {
    char want[128];
    snprintf(want, sizeof want,
             "settings table: entry 0: struct_size 1073741824 is larger "
             "than tm_setting (%zu bytes) of this host",
             sizeof(tm_setting));
    assert_refused(fixtures[FX_SETTINGS_STRIDE].path, want);
}
END_TEST

/* A plugin of ABI 1.0 loads: the host reads no field its struct_size does
 * not have (the fixture puts something that is no table where the 1.3
 * settings field would be). */
START_TEST(loads_abi_1_0_table) {
    tm_plugin p;
    ck_assert_msg(load(fixtures[FX_ABI_1_0].path, &p) == 0, "%s", err);
    ck_assert_uint_eq(p.api->abi_minor, 0);
    ck_assert_uint_eq(p.api->struct_size, TM_SINK_API_SIZE_1_0);
    ck_assert(!TM_SINK_API_HAS_SETTINGS(p.api));
}
END_TEST

/* ABI 1.4: the host says per scan whether its reader wants values; a host
 * table without the field (older than 1.4) reads as "wants them". */
START_TEST(host_scan_wants_values_1_4) {
    const tm_host_api *h = tm_host_services();
    ck_assert_uint_ge(h->abi_minor, 4);
    ck_assert_ptr_nonnull(h->scan_wants_values);
    tm_emit_target wants = {0}, bare = {.no_values = 1};
    ck_assert_int_eq(TM_HOST_SCAN_WANTS_VALUES(h, &wants), 1);
    ck_assert_int_eq(TM_HOST_SCAN_WANTS_VALUES(h, &bare), 0);
    tm_host_api old = *h; /* a 1.3 host's table: ends at settings_fill */
    old.struct_size = (uint32_t)offsetof(tm_host_api, scan_wants_values);
    ck_assert_int_eq(TM_HOST_SCAN_WANTS_VALUES(&old, &bare), 1);
}
END_TEST

START_TEST(refuses_small_struct) {
    char tail[TM_ERROR_MAX];
    expect(tail,
           "struct_size is 16, expected at least %lu (tm_sink_api of ABI "
           "1.0)",
           (unsigned long)TM_SINK_API_SIZE_1_0);
    assert_refused(fixtures[FX_SMALL_STRUCT].path, tail);
}
END_TEST

START_TEST(refuses_null_commit) {
    assert_refused(fixtures[FX_NULL_COMMIT].path,
                   "required callback 'commit' is NULL");
}
END_TEST

START_TEST(refuses_null_name) {
    assert_refused(fixtures[FX_NULL_NAME].path, "name is NULL");
}
END_TEST

/* ---- The error buffer --------------------------------------------------- */

START_TEST(error_buffer_may_be_small_or_absent) {
    tm_plugin p = {0};
    char small[12];
    memset(small, 'x', sizeof small);
    ck_assert_int_eq(tm_plugin_load(fixtures[FX_ABI_MAJOR].path, NULL, 0, &p,
                                    small, sizeof small),
                     -1);
    ck_assert_uint_eq(strlen(small), sizeof small - 1); /* truncated, ended */
    ck_assert_int_eq(
        tm_plugin_load(fixtures[FX_ABI_MAJOR].path, NULL, 0, &p, NULL, 0), -1);
    ck_assert_int_eq(
        tm_plugin_load(fixtures[FX_GOOD].path, NULL, 0, &p, NULL, 0), 0);
}
END_TEST

/* ---- Loading by name ---------------------------------------------------- */

START_TEST(load_by_name_searches_dirs_in_order) {
    char empty[TM_PLUGIN_PATH_MAX], first[TM_PLUGIN_PATH_MAX];
    char path[TM_PLUGIN_PATH_MAX];
    tmp_path(empty, "empty");
    tmp_path(first, "first");
    make_dir(empty);
    make_dir(first);
    join(path, first, "good.so");
    copy_file(fixtures[FX_GOOD].build_path, path, 0755);
    /* first/good.so wins over tmp/good.so: dirs are searched in order. */
    const char *dirs[] = {empty, first, tmp};
    tm_plugin p = {0};
    ck_assert_msg(tm_plugin_load("good", dirs, 3, &p, err, sizeof err) == 0,
                  "%s", err);
    ck_assert_str_eq(p.path, path);
    /* A "directory" that is a file holds nothing: the search goes on. */
    const char *odd[] = {fixtures[FX_GOOD].path, first};
    ck_assert_msg(tm_plugin_load("good", odd, 2, &p, err, sizeof err) == 0,
                  "%s", err);
    ck_assert_str_eq(p.path, path);
}
END_TEST

START_TEST(load_by_name_does_not_skip_a_refused_file) {
    char first[TM_PLUGIN_PATH_MAX], path[TM_PLUGIN_PATH_MAX];
    tmp_path(first, "refusing");
    make_dir(first);
    join(path, first, "good.so");
    copy_file(fixtures[FX_GOOD].build_path, path, 0666);
    const char *dirs[] = {first, tmp};
    tm_plugin p = {0};
    ck_assert_int_eq(tm_plugin_load("good", dirs, 2, &p, err, sizeof err), -1);
    ck_assert_msg(strstr(err, path) != NULL && strstr(err, "0666") != NULL,
                  "%s", err);
}
END_TEST

START_TEST(load_by_name_not_found) {
    const char *dirs[] = {"/nonexistent/a", "/nonexistent/b"};
    tm_plugin p = {0};
    ck_assert_int_eq(tm_plugin_load("nope", dirs, 2, &p, err, sizeof err), -1);
    ck_assert_str_eq(err, "plugin 'nope': no nope.so in the plugin path "
                          "/nonexistent/a:/nonexistent/b (see --plugin-dir, "
                          "TIDEMARK_PLUGIN_PATH)");
    ck_assert_int_eq(tm_plugin_load("nope", NULL, 0, &p, err, sizeof err), -1);
    ck_assert_str_eq(err, "plugin 'nope': no plugin directory to search");
}
END_TEST

/* ---- Search order ------------------------------------------------------- */

START_TEST(dirs_order_extra_env_default) {
    ck_assert_int_eq(setenv("TIDEMARK_PLUGIN_PATH", "/a::/b:", 1), 0);
    const char *extra[] = {"/x", NULL, "", "/y"};
    const char *dirs[16];
    size_t n = tm_plugin_dirs(extra, 4, dirs, 16);
    ck_assert_uint_eq(n, 5);
    ck_assert_str_eq(dirs[0], "/x");
    ck_assert_str_eq(dirs[1], "/y");
    ck_assert_str_eq(dirs[2], "/a");
    ck_assert_str_eq(dirs[3], "/b");
    ck_assert_str_eq(dirs[4], TM_EXPECTED_DEFAULT_DIR);
    ck_assert_str_eq(tm_plugin_default_dir(), TM_EXPECTED_DEFAULT_DIR);
}
END_TEST

START_TEST(dirs_keep_pointers_when_env_changes) {
    ck_assert_int_eq(setenv("TIDEMARK_PLUGIN_PATH", "/one", 1), 0);
    const char *before[4];
    ck_assert_uint_eq(tm_plugin_dirs(NULL, 0, before, 4), 2);
    ck_assert_int_eq(setenv("TIDEMARK_PLUGIN_PATH", "/two", 1), 0);
    const char *after[4];
    ck_assert_uint_eq(tm_plugin_dirs(NULL, 0, after, 4), 2);
    ck_assert_str_eq(before[0], "/one"); /* still valid, still the same */
    ck_assert_str_eq(after[0], "/two");
    ck_assert_int_eq(unsetenv("TIDEMARK_PLUGIN_PATH"), 0);
    ck_assert_uint_eq(tm_plugin_dirs(NULL, 0, after, 4), 1);
    ck_assert_str_eq(after[0], TM_EXPECTED_DEFAULT_DIR);
}
END_TEST

START_TEST(dirs_always_keep_the_default) {
    ck_assert_int_eq(setenv("TIDEMARK_PLUGIN_PATH", "/a:/b:/c", 1), 0);
    const char *extra[] = {"/x"};
    const char *dirs[3];
    ck_assert_uint_eq(tm_plugin_dirs(extra, 1, dirs, 3), 3);
    ck_assert_str_eq(dirs[0], "/x");
    ck_assert_str_eq(dirs[1], "/a");
    ck_assert_str_eq(dirs[2], TM_EXPECTED_DEFAULT_DIR);
}
END_TEST

/* The default directory is found beside the running binary, not at the
 * prefix the build was configured with (an install made with
 * `cmake --install --prefix` or moved elsewhere used to look in
 * /usr/local/lib/tidemark/plugins only). */
START_TEST(default_dir_beside_the_binary) {
    char out[64];
    ck_assert_int_eq(tm_plugin_dir_beside("/opt/tm/bin/tidemark",
                                          "../lib/tidemark/plugins", out,
                                          sizeof out),
                     0);
    ck_assert_str_eq(out, "/opt/tm/lib/tidemark/plugins");
    ck_assert_int_eq(tm_plugin_dir_beside("/opt/tm/bin/tidemark",
                                          "../../x/../lib64/p", out,
                                          sizeof out),
                     0);
    ck_assert_str_eq(out, "/opt/x/../lib64/p"); /* only leading ../ go up */
    ck_assert_int_eq(
        tm_plugin_dir_beside("/tidemark", "../../lib/p", out, sizeof out), 0);
    ck_assert_str_eq(out, "/lib/p");
    ck_assert_int_eq(
        tm_plugin_dir_beside("/usr/bin/tidemark", "plugins", out, sizeof out),
        0);
    ck_assert_str_eq(out, "/usr/bin/plugins");
    ck_assert_int_eq(tm_plugin_dir_beside("/opt/bin/tidemark", "/srv/plugins",
                                          out, sizeof out),
                     0);
    ck_assert_str_eq(out, "/srv/plugins");
    ck_assert_int_eq(
        tm_plugin_dir_beside("tidemark", "../lib/p", out, sizeof out), -1);
    ck_assert_int_eq(tm_plugin_dir_beside("/opt/tm/bin/tidemark",
                                          "../lib/tidemark/plugins", out, 16),
                     -1);
    /* This binary's own: from /proc/self/exe. */
    ck_assert_str_eq(tm_plugin_default_dir(), TM_EXPECTED_DEFAULT_DIR);
    ck_assert_str_ne(tm_plugin_default_dir(), TIDEMARK_DEFAULT_PLUGIN_DIR);
}
END_TEST

/* ---- Listing ------------------------------------------------------------ */

typedef struct seen {
    int n, ok, refused, shadowed;
    char names[8][64];
} seen;

static int record(const tm_plugin_entry *e, void *ctx) {
    seen *s = ctx;
    if (s->n < 8) {
        const char *base = strrchr(e->path, '/');
        snprintf(s->names[s->n], sizeof s->names[0], "%s%s%s",
                 base != NULL ? base + 1 : e->path,
                 e->plugin != NULL ? "" : ":refused",
                 e->shadowed ? ":shadowed" : "");
    }
    s->n++;
    s->ok += e->plugin != NULL;
    s->refused += e->plugin == NULL;
    s->shadowed += e->shadowed;
    ck_assert(e->plugin != NULL || (e->error != NULL && e->error[0] != '\0'));
    return 0;
}

START_TEST(list_sorted_with_refusals_and_shadowing) {
    char a[TM_PLUGIN_PATH_MAX], b[TM_PLUGIN_PATH_MAX];
    char path[TM_PLUGIN_PATH_MAX];
    tmp_path(a, "list-a");
    tmp_path(b, "list-b");
    make_dir(a);
    make_dir(b);
    join(path, a, "zz_good.so");
    copy_file(fixtures[FX_GOOD].build_path, path, 0755);
    join(path, a, "bad_magic.so");
    copy_file(fixtures[FX_BAD_MAGIC].build_path, path, 0755);
    join(path, a, "README");
    write_file(path, "not listed: no .so suffix\n", 0644);
    join(path, a, "sub.so");
    make_dir(path);
    join(path, b, "zz_good.so");
    copy_file(fixtures[FX_GOOD].build_path, path, 0755);
    /* a twice: listed once; a missing directory: skipped silently. */
    const char *dirs[] = {a, "/nonexistent/tidemark", a, b};
    seen s = {0};
    ck_assert_int_eq(tm_plugin_list(dirs, 4, record, &s, err, sizeof err), 0);
    ck_assert_int_eq(s.n, 4);
    ck_assert_str_eq(s.names[0], "bad_magic.so:refused");
    ck_assert_str_eq(s.names[1], "sub.so:refused");
    ck_assert_str_eq(s.names[2], "zz_good.so");
    ck_assert_str_eq(s.names[3], "zz_good.so:shadowed");
    ck_assert_int_eq(s.ok, 2);
    ck_assert_int_eq(s.refused, 2);
}
END_TEST

static int stop_at_first(const tm_plugin_entry *e, void *ctx) {
    (void)e;
    ++*(int *)ctx;
    return 1;
}

START_TEST(list_stops_when_asked) {
    const char *dirs[] = {tmp};
    int calls = 0;
    ck_assert_int_eq(
        tm_plugin_list(dirs, 1, stop_at_first, &calls, err, sizeof err), 0);
    ck_assert_int_eq(calls, 1);
}
END_TEST

START_TEST(list_reports_a_file_given_as_dir) {
    const char *dirs[] = {fixtures[FX_GOOD].path};
    seen s = {0};
    ck_assert_int_eq(tm_plugin_list(dirs, 1, record, &s, err, sizeof err), -1);
    ck_assert_int_eq(s.n, 0);
    char want[TM_ERROR_MAX];
    expect(want, "plugin directory %s: cannot read: Not a directory",
           fixtures[FX_GOOD].path);
    ck_assert_str_eq(err, want);
}
END_TEST

/* ---- Ownership, the directory, relative paths --------------------------- */

/* A plugin directory anyone may write to: its plugin loaded as "ok". */
START_TEST(refuses_plugin_in_writable_dir) {
    char dir[TM_PLUGIN_PATH_MAX], path[TM_PLUGIN_PATH_MAX];
    tmp_path(dir, "open-dir");
    make_dir(dir);
    if (chmod(dir, 0777) != 0)
        die("chmod", dir);
    join(path, dir, "good.so");
    copy_file(fixtures[FX_GOOD].build_path, path, 0755);
    char tail[TM_ERROR_MAX];
    expect(tail,
           "directory %s is writable by group or others (mode 0777); "
           "expected no group/other write (chmod go-w %s)",
           dir, dir);
    assert_refused(path, tail);
    /* Listing it says the same. */
    const char *dirs[] = {dir};
    seen s = {0};
    ck_assert_int_eq(tm_plugin_list(dirs, 1, record, &s, err, sizeof err), 0);
    ck_assert_int_eq(s.n, 1);
    ck_assert_int_eq(s.refused, 1);
}
END_TEST

/* Names with '/' are paths: a relative one depends on the working
 * directory, so it is refused, as a relative plugin directory is. */
START_TEST(refuses_relative_paths) {
    char dir[TM_PLUGIN_PATH_MAX], path[TM_PLUGIN_PATH_MAX], cwd[4096];
    tmp_path(dir, "rel");
    make_dir(dir);
    join(path, dir, "good.so");
    copy_file(fixtures[FX_GOOD].build_path, path, 0755);
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_int_eq(chdir(tmp), 0);
    tm_plugin p = {0};
    int by_path = tm_plugin_load("rel/good.so", NULL, 0, &p, err, sizeof err);
    char by_path_err[TM_ERROR_MAX];
    memcpy(by_path_err, err, sizeof err);
    const char *dirs[] = {"rel"};
    int by_dir = tm_plugin_load("good", dirs, 1, &p, err, sizeof err);
    char by_dir_err[TM_ERROR_MAX];
    memcpy(by_dir_err, err, sizeof err);
    seen s = {0};
    int listed = tm_plugin_list(dirs, 1, record, &s, err, sizeof err);
    ck_assert_int_eq(chdir(cwd), 0);
    ck_assert_int_eq(by_path, -1);
    ck_assert_str_eq(by_path_err,
                     "plugin rel/good.so: path is relative; expected an "
                     "absolute path, or a plain name to look up in the "
                     "plugin directories");
    ck_assert_int_eq(by_dir, -1);
    ck_assert_str_eq(by_dir_err,
                     "plugin 'good': plugin directory rel is relative; "
                     "expected an absolute path (see --plugin-dir, "
                     "TIDEMARK_PLUGIN_PATH)");
    ck_assert_int_eq(listed, -1);
    ck_assert_int_eq(s.n, 0);
    ck_assert_str_eq(err, "plugin directory rel: relative path; expected an "
                          "absolute path");
}
END_TEST

/* Owned by someone other than root or the running user: refused, the file
 * and its directory. Making such a file needs root. */
START_TEST(refuses_foreign_owner) {
    char dir[TM_PLUGIN_PATH_MAX], path[TM_PLUGIN_PATH_MAX];
    tmp_path(dir, "foreign");
    make_dir(dir);
    join(path, dir, "good.so");
    copy_file(fixtures[FX_GOOD].build_path, path, 0755);
    ck_assert_int_eq(chown(path, 65534, 65534), 0);
    char tail[TM_ERROR_MAX];
    expect(tail,
           "owner is uid 65534; expected root or the running user (uid %ld)",
           (long)geteuid());
    assert_refused(path, tail);
    ck_assert_int_eq(chown(path, geteuid(), getegid()), 0);
    ck_assert_int_eq(chown(dir, 65534, 65534), 0);
    expect(tail,
           "directory %s: owner is uid 65534; expected root or the running "
           "user (uid %ld)",
           dir, (long)geteuid());
    assert_refused(path, tail);
}
END_TEST

/* ---- The attacker review: links, ancestors, names ----------------------- */

/* A symbolic link to a good plugin, planted in a directory anyone may write
 * to: whoever wrote the link chooses what is loaded (and may swap it between
 * the checks and the dlopen), so the link's own directory is checked, not
 * only the directory of the file it points to. */
START_TEST(refuses_symlink_in_world_writable_dir) {
    char dir[TM_PLUGIN_PATH_MAX], link_path[TM_PLUGIN_PATH_MAX];
    tmp_path(dir, "planted");
    make_dir(dir);
    if (chmod(dir, 0777) != 0)
        die("chmod", dir);
    join(link_path, dir, "good.so");
    if (symlink(fixtures[FX_GOOD].path, link_path) != 0)
        die("symlink", link_path);
    char tail[TM_ERROR_MAX];
    expect(tail,
           "directory %s is writable by group or others (mode 0777); "
           "expected no group/other write (chmod go-w %s)",
           dir, dir);
    assert_refused(link_path, tail);
    /* By name through that directory: the same refusal. */
    const char *dirs[] = {dir};
    tm_plugin p = {0};
    ck_assert_int_eq(tm_plugin_load("good", dirs, 1, &p, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "mode 0777") != NULL, "%s", err);
}
END_TEST

/* A link to a good directory, planted higher up the path in a directory
 * anyone may write to: refused for the link's directory as well. */
START_TEST(refuses_dir_symlink_in_world_writable_dir) {
    char open_dir[TM_PLUGIN_PATH_MAX], good_dir[TM_PLUGIN_PATH_MAX];
    char link_path[TM_PLUGIN_PATH_MAX], path[TM_PLUGIN_PATH_MAX];
    tmp_path(open_dir, "planted-above");
    make_dir(open_dir);
    if (chmod(open_dir, 0777) != 0)
        die("chmod", open_dir);
    tmp_path(good_dir, "good-dir");
    make_dir(good_dir);
    join(path, good_dir, "good.so");
    copy_file(fixtures[FX_GOOD].build_path, path, 0755);
    join(link_path, open_dir, "plugins");
    if (symlink(good_dir, link_path) != 0)
        die("symlink", link_path);
    join(path, link_path, "good.so");
    char tail[TM_ERROR_MAX];
    expect(tail,
           "directory %s is writable by group or others (mode 0777); "
           "expected no group/other write (chmod go-w %s)",
           open_dir, open_dir);
    assert_refused(path, tail);
}
END_TEST

/* A sticky world-writable directory (like /tmp) as the plugin directory:
 * others cannot replace our file there, but they can add any name. */
START_TEST(refuses_sticky_plugin_dir) {
    char dir[TM_PLUGIN_PATH_MAX], path[TM_PLUGIN_PATH_MAX];
    tmp_path(dir, "sticky");
    make_dir(dir);
    if (chmod(dir, 01777) != 0)
        die("chmod", dir);
    join(path, dir, "good.so");
    copy_file(fixtures[FX_GOOD].build_path, path, 0755);
    char tail[TM_ERROR_MAX];
    expect(tail,
           "directory %s is writable by group or others (mode 1777); "
           "expected no group/other write (chmod go-w %s)",
           dir, dir);
    assert_refused(path, tail);
}
END_TEST

/* A good directory inside one anyone may write to: the writable one can
 * have the good directory renamed away and another put in its place. */
START_TEST(refuses_writable_ancestor) {
    char top[TM_PLUGIN_PATH_MAX], dir[TM_PLUGIN_PATH_MAX];
    char path[TM_PLUGIN_PATH_MAX];
    tmp_path(top, "open-top");
    make_dir(top);
    if (chmod(top, 0777) != 0)
        die("chmod", top);
    join(dir, top, "plugins");
    make_dir(dir);
    join(path, dir, "good.so");
    copy_file(fixtures[FX_GOOD].build_path, path, 0755);
    char tail[TM_ERROR_MAX];
    expect(tail,
           "directory %s is writable by group or others (mode 0777); "
           "expected no group/other write (chmod go-w %s)",
           top, top);
    assert_refused(path, tail);
}
END_TEST

/* Loaded by name, the plugin must call itself by that name: "postgres.so"
 * that says it is "good" is not what the config asked for. */
START_TEST(refuses_name_mismatch) {
    char dir[TM_PLUGIN_PATH_MAX], path[TM_PLUGIN_PATH_MAX];
    tmp_path(dir, "renamed");
    make_dir(dir);
    join(path, dir, "other.so");
    copy_file(fixtures[FX_GOOD].build_path, path, 0755);
    const char *dirs[] = {dir};
    tm_plugin p = {0};
    ck_assert_int_eq(tm_plugin_load("other", dirs, 1, &p, err, sizeof err), -1);
    ck_assert_ptr_null(p.api);
    char want[TM_ERROR_MAX];
    expect(want,
           "plugin %s: name is 'good', expected 'other' (the name it was "
           "loaded by)",
           path);
    ck_assert_str_eq(err, want);
}
END_TEST

/* The fd the checks ran on is the file dlopen maps: loading two different
 * files one after the other (the second may get the first's descriptor
 * number) gives each its own table. */
START_TEST(loads_the_checked_file_not_a_reused_fd_name) {
    tm_plugin a = {0}, b = {0};
    ck_assert_msg(load(fixtures[FX_GOOD].path, &a) == 0, "%s", err);
    ck_assert_int_eq(load(fixtures[FX_BAD_MAGIC].path, &b), -1);
    ck_assert_msg(strstr(err, "magic is 0xdeadbeef") != NULL, "%s", err);
    ck_assert_int_eq(load(fixtures[FX_ABI_MAJOR].path, &b), -1);
    ck_assert_msg(strstr(err, "abi_major is 2") != NULL, "%s", err);
}
END_TEST

/* ---- Threads: dlerror() is per process on some libcs and its text is
 * overwritten by the next dl* call; the loader's lock keeps each thread's
 * message its own. ---------------------------------------------------- */

#define NTHREADS 8
#define NROUNDS  100

static void *load_many(void *arg) {
    long id = (long)arg;
    char e[TM_ERROR_MAX];
    for (int i = 0; i < NROUNDS; i++) {
        int which = (int)((id + i) % 3);
        const char *path = which == 0   ? fixtures[FX_UNRESOLVED].path
                           : which == 1 ? fixtures[FX_NO_ENTRY].path
                                        : fixtures[FX_GOOD].path;
        tm_plugin p;
        int rc = tm_plugin_load(path, NULL, 0, &p, e, sizeof e);
        if (which == 2 ? rc != 0 : rc != -1)
            return (void *)"wrong result";
        if (which == 0 && strstr(e, "tm_fixture_undefined_function") == NULL)
            return (void *)"unresolved message lost";
        if (which == 1 && strstr(e, "entry symbol") == NULL)
            return (void *)"no-entry message lost";
        if (which != 2 && strstr(e, path) == NULL)
            return (void *)"message names another file";
    }
    return NULL;
}

START_TEST(concurrent_loads_keep_their_messages) {
    pthread_t t[NTHREADS];
    for (long i = 0; i < NTHREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, load_many, (void *)i), 0);
    for (int i = 0; i < NTHREADS; i++) {
        void *res = NULL;
        ck_assert_int_eq(pthread_join(t[i], &res), 0);
        ck_assert_msg(res == NULL, "thread %d: %s", i, (const char *)res);
    }
}
END_TEST

/* ---- Runner ------------------------------------------------------------- */

static Suite *loader_suite(void) {
    Suite *s = suite_create("abi");
    TCase *load_tc = tcase_create("load");
    tcase_add_test(load_tc, good_loads);
    tcase_add_test(load_tc, good_loads_from_build_tree_path);
    tcase_add_test(load_tc, good_loads_twice_same_table);
    tcase_add_test(load_tc, error_buffer_may_be_small_or_absent);
    suite_add_tcase(s, load_tc);

    TCase *refuse_tc = tcase_create("refuse");
    tcase_add_test(refuse_tc, refuses_directory);
    tcase_add_test(refuse_tc, refuses_world_writable);
    tcase_add_test(refuse_tc, refuses_group_writable);
    tcase_add_test(refuse_tc, refuses_missing_file);
    tcase_add_test(refuse_tc, refuses_unresolved_symbol);
    tcase_add_test(refuse_tc, refuses_not_elf);
    tcase_add_test(refuse_tc, refuses_missing_entry);
    tcase_add_test(refuse_tc, refuses_null_entry);
    tcase_add_test(refuse_tc, refuses_bad_magic);
    tcase_add_test(refuse_tc, refuses_abi_major);
    tcase_add_test(refuse_tc, refuses_abi_minor);
    tcase_add_test(refuse_tc, refuses_bad_settings_table);
    tcase_add_test(refuse_tc, refuses_settings_table_stride);
    tcase_add_test(refuse_tc, loads_abi_1_0_table);
    tcase_add_test(refuse_tc, host_scan_wants_values_1_4);
    tcase_add_test(refuse_tc, refuses_small_struct);
    tcase_add_test(refuse_tc, refuses_null_commit);
    tcase_add_test(refuse_tc, refuses_null_name);
    tcase_add_test(refuse_tc, refuses_plugin_in_writable_dir);
    tcase_add_test(refuse_tc, refuses_relative_paths);
    tcase_add_test(refuse_tc, refuses_symlink_in_world_writable_dir);
    tcase_add_test(refuse_tc, refuses_dir_symlink_in_world_writable_dir);
    tcase_add_test(refuse_tc, refuses_sticky_plugin_dir);
    tcase_add_test(refuse_tc, refuses_writable_ancestor);
    tcase_add_test(refuse_tc, refuses_name_mismatch);
    tcase_add_test(refuse_tc, loads_the_checked_file_not_a_reused_fd_name);
    if (geteuid() == 0)
        tcase_add_test(refuse_tc, refuses_foreign_owner);
    else
        fprintf(stderr, "test_loader: refuses_foreign_owner not run: only "
                        "root can make a file another user owns\n");
    suite_add_tcase(s, refuse_tc);

    TCase *name_tc = tcase_create("by_name");
    tcase_add_test(name_tc, load_by_name_searches_dirs_in_order);
    tcase_add_test(name_tc, load_by_name_does_not_skip_a_refused_file);
    tcase_add_test(name_tc, load_by_name_not_found);
    suite_add_tcase(s, name_tc);

    TCase *dirs_tc = tcase_create("dirs");
    tcase_add_test(dirs_tc, dirs_order_extra_env_default);
    tcase_add_test(dirs_tc, dirs_keep_pointers_when_env_changes);
    tcase_add_test(dirs_tc, dirs_always_keep_the_default);
    tcase_add_test(dirs_tc, default_dir_beside_the_binary);
    tcase_add_test(dirs_tc, list_sorted_with_refusals_and_shadowing);
    tcase_add_test(dirs_tc, list_stops_when_asked);
    tcase_add_test(dirs_tc, list_reports_a_file_given_as_dir);
    suite_add_tcase(s, dirs_tc);

    TCase *threads_tc = tcase_create("threads");
    tcase_add_test(threads_tc, concurrent_loads_keep_their_messages);
    tcase_set_timeout(threads_tc, 60);
    suite_add_tcase(s, threads_tc);
    return s;
}

int main(void) {
    setup_tmp();
    SRunner *sr = srunner_create(loader_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    remove_tree(tmp);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
