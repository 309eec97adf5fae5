#ifndef INBOX_CARCHIVE_SHIM_H
#define INBOX_CARCHIVE_SHIM_H

#include <archive.h>
#include <archive_entry.h>

// The type of each function the backup calls, from its prototype: LazyLibrary resolves them by name (libarchive,
// with ICU, libxml2 and libstdc++ behind it, is opened by the first backup or restore, not linked: an `inbox
// import` never loads it).
typedef __typeof__(archive_entry_copy_hardlink) *inbox_archive_entry_copy_hardlink;
typedef __typeof__(archive_entry_copy_pathname) *inbox_archive_entry_copy_pathname;
typedef __typeof__(archive_entry_copy_symlink) *inbox_archive_entry_copy_symlink;
typedef __typeof__(archive_entry_filetype) *inbox_archive_entry_filetype;
typedef __typeof__(archive_entry_free) *inbox_archive_entry_free;
typedef __typeof__(archive_entry_hardlink) *inbox_archive_entry_hardlink;
typedef __typeof__(archive_entry_hardlink_utf8) *inbox_archive_entry_hardlink_utf8;
typedef __typeof__(archive_entry_new) *inbox_archive_entry_new;
typedef __typeof__(archive_entry_pathname) *inbox_archive_entry_pathname;
typedef __typeof__(archive_entry_pathname_utf8) *inbox_archive_entry_pathname_utf8;
typedef __typeof__(archive_entry_perm) *inbox_archive_entry_perm;
typedef __typeof__(archive_entry_set_filetype) *inbox_archive_entry_set_filetype;
typedef __typeof__(archive_entry_set_gid) *inbox_archive_entry_set_gid;
typedef __typeof__(archive_entry_set_mtime) *inbox_archive_entry_set_mtime;
typedef __typeof__(archive_entry_set_perm) *inbox_archive_entry_set_perm;
typedef __typeof__(archive_entry_set_size) *inbox_archive_entry_set_size;
typedef __typeof__(archive_entry_set_uid) *inbox_archive_entry_set_uid;
typedef __typeof__(archive_entry_symlink) *inbox_archive_entry_symlink;
typedef __typeof__(archive_entry_symlink_utf8) *inbox_archive_entry_symlink_utf8;
typedef __typeof__(archive_errno) *inbox_archive_errno;
typedef __typeof__(archive_error_string) *inbox_archive_error_string;
typedef __typeof__(archive_read_data_block) *inbox_archive_read_data_block;
typedef __typeof__(archive_read_free) *inbox_archive_read_free;
typedef __typeof__(archive_read_header_position) *inbox_archive_read_header_position;
typedef __typeof__(archive_read_new) *inbox_archive_read_new;
typedef __typeof__(archive_read_next_header) *inbox_archive_read_next_header;
typedef __typeof__(archive_read_open_fd) *inbox_archive_read_open_fd;
typedef __typeof__(archive_read_support_format_tar) *inbox_archive_read_support_format_tar;
typedef __typeof__(archive_write_close) *inbox_archive_write_close;
typedef __typeof__(archive_write_data) *inbox_archive_write_data;
typedef __typeof__(archive_write_data_block) *inbox_archive_write_data_block;
typedef __typeof__(archive_write_disk_new) *inbox_archive_write_disk_new;
typedef __typeof__(archive_write_disk_set_options) *inbox_archive_write_disk_set_options;
typedef __typeof__(archive_write_finish_entry) *inbox_archive_write_finish_entry;
typedef __typeof__(archive_write_free) *inbox_archive_write_free;
typedef __typeof__(archive_write_header) *inbox_archive_write_header;
typedef __typeof__(archive_write_new) *inbox_archive_write_new;
typedef __typeof__(archive_write_open_fd) *inbox_archive_write_open_fd;
typedef __typeof__(archive_write_set_format_pax) *inbox_archive_write_set_format_pax;

#endif
