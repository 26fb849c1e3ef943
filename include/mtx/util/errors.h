// Exception types that carry the process exit code, and the exit codes themselves.
// Throw ConfigError/DataError at config and I/O boundaries; the CLI maps every error to one line.
#pragma once

#include <stdexcept>
#include <string>

namespace mtx {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,  // a run failed after it started
  kExitUsage = 2,    // bad flags, bad config, missing or malformed input files
  kExitInterrupted = 130,
  kExitTerminated = 143,
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, int exit_code = kExitFailure)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// A configuration key that is unknown, mistyped or out of range (message names the key).
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& message) : Error(message, kExitUsage) {}
};

// An input file that is missing, unreadable or malformed (message names the file and line).
class DataError : public Error {
 public:
  explicit DataError(const std::string& message) : Error(message, kExitUsage) {}
};

// The file named is not there (Python: FileNotFoundError).
class NotFoundError : public DataError {
 public:
  explicit NotFoundError(const std::string& message) : DataError(message) {}
};

// A model file that is there but is not a readable, intact mtx checkpoint (Python: mtx.CheckpointError).
class CheckpointError : public DataError {
 public:
  explicit CheckpointError(const std::string& message) : DataError(message) {}
};

}  // namespace mtx
