/* File-system steps of a commit, each result checked: durable writes of new
 * files (O_EXCL, full write, fsync), directory fsyncs, the no-overwrite
 * publish (link), whole-file reads, and random names. A file whose write or
 * fsync failed is removed and never used again: the caller writes a new
 * one under a new name (after a failed fsync the page cache may hold data
 * the disk does not). Every failure names the path and errno's text. */
#ifndef TM_ICE_FSIO_H
#define TM_ICE_FSIO_H

#include <stddef.h>
#include <stdint.h>

/* Creates PATH (which must not exist) with DATA; fsyncs it when sync.
 * 0, or -1 with why (a message) filled. */
int fs_write_new(const char *path, const void *data, size_t len, int sync,
                 char *why, size_t why_size);
/* Replaces PATH's content by DATA (not synced) through SPARE, a file name
 * of the caller's own that it keeps from one call to the next: SPARE is
 * written (created when missing) and then exchanged with PATH in one step
 * (renameat2 RENAME_EXCHANGE), so a reader opening PATH finds the old
 * content or the new one, whole, and PATH's old inode becomes the next
 * spare instead of being freed: no inode is allocated or freed per call
 * (each is an inode allocation on a file system that may have to step over
 * recently freed ones, docs/iceberg-lite.md, "What a commit costs"). Where
 * PATH does not exist yet or the file system cannot exchange, SPARE is
 * renamed over PATH instead (and made afresh next time). 0, or -1 with why
 * (the caller may fall back to a new temp file and rename). */
int fs_replace_via_spare(const char *spare, const char *path, const void *data,
                         size_t len, char *why, size_t why_size);
/* syncfs(2) of the file system holding FD (WHAT names it in messages):
 * every file written on it and every directory entry made on it before
 * the call are durable when it returns 0. Since Linux 5.8 it reports a
 * write-back error on that file system since FD was opened (or since the
 * last syncfs on FD). 0, or -1 with why. */
int fs_sync_fs(int fd, const char *what, char *why, size_t why_size);
/* fsync of a directory, so that entries created in it are durable. */
int fs_sync_dir(const char *dir, char *why, size_t why_size);
/* Creates DIR when missing (one level). When it made DIR and sync, fsyncs
 * the parent directory before returning, so the new entry is durable.
 * 0 or -1. */
int fs_mkdir(const char *dir, int sync, char *why, size_t why_size);
/* Opens PATH with FLAGS (O_NOFOLLOW and O_CLOEXEC added), walking it one
 * component at a time from "/" (or the working directory) with openat()
 * and O_NOFOLLOW: a symbolic link anywhere on the path is refused, not
 * only a final one. The table's root is a real path (no symlink in it),
 * so a file named under it is read inside it, never through a symlinked
 * data/ or metadata/ pointing elsewhere. The fd; -1 a component does not
 * exist; -2 with why (a symlink met, or another error). */
int fs_open_nofollow(const char *path, int flags, char *why, size_t why_size);
/* Reads the whole file into a malloc'd buffer (NUL-terminated too),
 * opened by fs_open_nofollow. Regular files only: no symlink is followed
 * on the way and a FIFO or device is refused without blocking. 0; 1 when
 * it does not exist; -1 on other errors. */
int fs_read_all(const char *path, uint8_t **data, size_t *len, char *why,
                size_t why_size);
/* 1 when PATH exists, 0 when not, -1 when it cannot be told. */
int fs_exists(const char *path);
/* Fills buf with n random bytes (getrandom(2); /dev/urandom where the
 * kernel has no getrandom). 0 or -1. */
int fs_random(void *buf, size_t n);
/* A random version-4 UUID, "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx". */
int fs_uuid(char out[37]);

/* A path as an error message shows it: itself, or "(a path of N bytes)"
 * when it is too long for the plugin's message buffers. A path cut in a
 * message can end in part of a ${env:}/${file:} secret, and the host
 * recognises a secret only whole, so a long path is never shown cut. */
#define FS_PATH_SHOWN_MAX 255
const char *fs_path_shown(const char *path, char buf[48]);

#endif
