/* The state directory against someone who may write to a directory on its
 * way (a shared sticky /tmp, a volume others mount): a planted link must
 * not redirect the host's writes, and swapping a directory after start
 * must not either (every write goes through the connector directory's fd).
 * "Another user" is simulated as uid 65534: the tests that need it run as
 * root only (a file owned by someone else can only be made by root). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "status/status_file.h"
#include "check_main.h"

#define OTHER_UID 65534

static char base[256]; /* private, 0700 */

static void make_base(void) {
    snprintf(base, sizeof base, "/tmp/tm_state_dir_test.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(base));
}

static void remove_base(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    ck_assert_int_eq(system(cmd), 0);
}

static void path_of(char *out, size_t size, const char *rel) {
    int n = snprintf(out, size, "%s/%s", base, rel);
    ck_assert(n > 0 && (size_t)n < size);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_ge(fputs(text, f), 0);
    ck_assert_int_eq(fclose(f), 0);
}

static void read_text(const char *path, char *out, size_t size) {
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    out[fread(out, 1, size - 1, f)] = '\0';
    ck_assert_int_eq(fclose(f), 0);
}

/* The victim: the user's own directory holding a status.json of a
 * connector named "c" (any file there would do). */
static void make_victim(char *victim, size_t size) {
    char file[400];
    path_of(victim, size, "victim");
    ck_assert_int_eq(mkdir(victim, 0700), 0);
    path_of(file, sizeof file, "victim/c");
    ck_assert_int_eq(mkdir(file, 0700), 0);
    path_of(file, sizeof file, "victim/c/status.json");
    write_text(file, "victim\n");
}

static void check_victim_untouched(void) {
    char file[400], text[64];
    path_of(file, sizeof file, "victim/c/status.json");
    read_text(file, text, sizeof text);
    ck_assert_str_eq(text, "victim\n");
    path_of(file, sizeof file, "victim/c/host.lock");
    ck_assert_int_eq(access(file, F_OK), -1);
    path_of(file, sizeof file, "victim/c/status.json.tmp");
    ck_assert_int_eq(access(file, F_OK), -1);
}

static void snapshot(tm_status_snapshot *s) {
    memset(s, 0, sizeof *s);
    snprintf(s->connector, sizeof s->connector, "c");
    s->state = TM_CONN_RUNNING;
    s->pid = (long)getpid();
}

/* Another user plants, in a shared sticky directory, a link named like the
 * state directory the host will use, pointing at the user's own files. */
START_TEST(planted_symlinked_state_dir_refused) {
    make_base();
    char victim[300], shared[300], link_path[400], err[512] = "";
    make_victim(victim, sizeof victim);
    path_of(shared, sizeof shared, "shared");
    ck_assert_int_eq(mkdir(shared, 0700), 0);
    ck_assert_int_eq(chmod(shared, 01777), 0);
    path_of(link_path, sizeof link_path, "shared/tidemark-state");
    ck_assert_int_eq(symlink(victim, link_path), 0);
    ck_assert_int_eq(lchown(link_path, OTHER_UID, OTHER_UID), 0);
    tm_status_writer *w =
        tm_status_writer_open(link_path, "c", err, sizeof err);
    if (w != NULL) {
        tm_status_snapshot s;
        snapshot(&s);
        (void)tm_status_writer_write(w, &s, err, sizeof err);
        tm_status_writer_close(w);
    }
    check_victim_untouched();
    ck_assert_msg(w == NULL, "a planted link was followed");
    ck_assert_msg(strstr(err, link_path) != NULL &&
                      strstr(err, "symbolic link") != NULL,
                  "%s", err);
    remove_base();
}
END_TEST

/* The connector's directory swapped for a link after the writer opened it:
 * the writer keeps writing into the directory it opened. */
START_TEST(swapped_connector_dir_after_open) {
    make_base();
    char victim[300], state[300], cdir[400], moved[400], err[512] = "";
    make_victim(victim, sizeof victim);
    path_of(state, sizeof state, "state");
    tm_status_writer *w = tm_status_writer_open(state, "c", err, sizeof err);
    ck_assert_msg(w != NULL, "%s", err);
    path_of(cdir, sizeof cdir, "state/c");
    path_of(moved, sizeof moved, "state/c.moved");
    ck_assert_int_eq(rename(cdir, moved), 0);
    char target[400];
    path_of(target, sizeof target, "victim/c");
    ck_assert_int_eq(symlink(target, cdir), 0);
    tm_status_snapshot s;
    snapshot(&s);
    int rc = tm_status_writer_write(w, &s, err, sizeof err);
    tm_status_writer_close(w);
    check_victim_untouched();
    ck_assert_msg(rc == 0, "%s", err);
    /* Written where the writer's directory now is. */
    char file[400], text[4096];
    path_of(file, sizeof file, "state/c.moved/status.json");
    read_text(file, text, sizeof text);
    ck_assert_msg(strstr(text, "\"connector\"") != NULL, "%s", text);
    remove_base();
}
END_TEST

/* The top state directory swapped after start: the same. */
START_TEST(swapped_state_dir_after_open) {
    make_base();
    char victim[300], state[300], moved[400], err[512] = "";
    make_victim(victim, sizeof victim);
    path_of(state, sizeof state, "state");
    tm_status_writer *w = tm_status_writer_open(state, "c", err, sizeof err);
    ck_assert_msg(w != NULL, "%s", err);
    path_of(moved, sizeof moved, "state.moved");
    ck_assert_int_eq(rename(state, moved), 0);
    ck_assert_int_eq(symlink(victim, state), 0);
    tm_status_snapshot s;
    snapshot(&s);
    int rc = tm_status_writer_write(w, &s, err, sizeof err);
    tm_status_writer_close(w);
    check_victim_untouched();
    ck_assert_msg(rc == 0, "%s", err);
    char file[400], text[4096];
    path_of(file, sizeof file, "state.moved/c/status.json");
    read_text(file, text, sizeof text);
    ck_assert_msg(strstr(text, "\"connector\"") != NULL, "%s", text);
    remove_base();
}
END_TEST

/* A directory above the state directory that others may write to (not
 * sticky): they could rename the state directory away and put theirs. */
START_TEST(writable_ancestor_refused) {
    make_base();
    char open_dir[300], state[400], err[512] = "";
    path_of(open_dir, sizeof open_dir, "open");
    ck_assert_int_eq(mkdir(open_dir, 0700), 0);
    ck_assert_int_eq(chmod(open_dir, 0777), 0);
    path_of(state, sizeof state, "open/state");
    ck_assert_int_eq(mkdir(state, 0700), 0);
    ck_assert_ptr_null(tm_status_writer_open(state, "c", err, sizeof err));
    ck_assert_msg(strstr(err, open_dir) != NULL &&
                      strstr(err, "writable by group or others (mode 0777)"),
                  "%s", err);
    remove_base();
}
END_TEST

/* A link the user made, in a directory only the user may write to, is the
 * user's choice: followed. */
START_TEST(own_link_in_private_dir_followed) {
    make_base();
    char real[300], link_path[300], err[512] = "";
    path_of(real, sizeof real, "real-state");
    ck_assert_int_eq(mkdir(real, 0700), 0);
    path_of(link_path, sizeof link_path, "state-link");
    ck_assert_int_eq(symlink(real, link_path), 0);
    tm_status_writer *w =
        tm_status_writer_open(link_path, "c", err, sizeof err);
    ck_assert_msg(w != NULL, "%s", err);
    tm_status_writer_close(w);
    char lock[400];
    path_of(lock, sizeof lock, "real-state/c/host.lock");
    ck_assert_int_eq(access(lock, F_OK), 0);
    remove_base();
}
END_TEST

/* The Kubernetes volume layout: root-owned, setgid, group-writable, the
 * group one of the process's groups (fsGroup). Accepted: the connector's
 * own directory is the user's and every write goes through its fd. */
START_TEST(setgid_group_volume_accepted) {
    make_base();
    char vol[300], err[512] = "";
    path_of(vol, sizeof vol, "volume");
    ck_assert_int_eq(mkdir(vol, 0700), 0);
    ck_assert_int_eq(chown(vol, 0, getegid()), 0);
    ck_assert_int_eq(chmod(vol, 02775), 0);
    tm_status_writer *w = tm_status_writer_open(vol, "c", err, sizeof err);
    ck_assert_msg(w != NULL, "%s", err);
    tm_status_writer_close(w);
    /* Not when others may write, or without setgid. */
    ck_assert_int_eq(chmod(vol, 02777), 0);
    ck_assert_ptr_null(tm_status_writer_open(vol, "c", err, sizeof err));
    ck_assert_msg(strstr(err, "mode 2777") != NULL, "%s", err);
    ck_assert_int_eq(chmod(vol, 0775), 0);
    ck_assert_ptr_null(tm_status_writer_open(vol, "c", err, sizeof err));
    ck_assert_msg(strstr(err, "mode 0775") != NULL, "%s", err);
    remove_base();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("state_dir");
    TCase *tc = tcase_create("attacks");
    tcase_add_test(tc, swapped_connector_dir_after_open);
    tcase_add_test(tc, swapped_state_dir_after_open);
    tcase_add_test(tc, writable_ancestor_refused);
    tcase_add_test(tc, own_link_in_private_dir_followed);
    /* Files owned by another user, or by root with a group of ours, can
     * only be made by root: elsewhere these two are not run (and say so). */
    if (geteuid() == 0) {
        tcase_add_test(tc, planted_symlinked_state_dir_refused);
        tcase_add_test(tc, setgid_group_volume_accepted);
    } else {
        fprintf(stderr, "test_state_dir: planted_symlinked_state_dir_refused "
                        "and setgid_group_volume_accepted not run: need "
                        "root\n");
    }
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
