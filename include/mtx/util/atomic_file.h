// Crash-safe file writes: write a temp file beside the target, fsync it, rename over the target,
// fsync the directory. A reader sees the old file or the new one, never a torn one.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

namespace mtx {

// Calls `write` with a stream on a temp file, then atomically replaces `path`. Creates parent dirs.
void write_file_atomic(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write);
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

// Makes `to` a copy of `from` atomically (a hard link when the file system allows it, else a copy; `from`
// must itself only ever be replaced by rename, as write_file_atomic does).
void copy_file_atomic(const std::filesystem::path& from, const std::filesystem::path& to);

// Whole file as bytes; throws DataError naming the path when missing or unreadable.
std::string read_file(const std::filesystem::path& path);

}  // namespace mtx
