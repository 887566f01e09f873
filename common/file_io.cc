#include "common/file_io.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace consensor {

StatusOr<std::vector<uint8_t>> ReadFileBytes(const std::string& path, int64_t max_bytes) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return NotFound("cannot open '" + path + "'");
  std::vector<uint8_t> bytes;
  // The file's size as a hint (a pipe says 0, a growing file more later): one allocation instead
  // of a doubling series of them, each copied into the next (tens of MB for a model's weights).
  struct stat st {};
  if (fstat(fileno(f), &st) == 0 && st.st_size > 0) {
    bytes.reserve(static_cast<size_t>(std::min<int64_t>(st.st_size, max_bytes)));
  }
  uint8_t buf[1 << 16];
  for (;;) {
    size_t n = std::fread(buf, 1, sizeof(buf), f);
    if (n == 0) break;
    if (static_cast<int64_t>(bytes.size() + n) > max_bytes) {
      std::fclose(f);
      return ResourceExhausted("'" + path + "' is larger than the cap of " + std::to_string(max_bytes) + " bytes");
    }
    bytes.insert(bytes.end(), buf, buf + n);
  }
  bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) return DataLoss("error reading '" + path + "'");
  return bytes;
}

Status WriteFileAtomic(const std::string& path, std::span<const uint8_t> bytes) {
  std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return NotFound("cannot create '" + tmp + "'");
  bool ok = bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = (std::fflush(f) == 0) && ok;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return DataLoss("cannot write '" + path + "'");
  }
  return OkStatus();
}

Status CreateDirectories(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec || !std::filesystem::is_directory(path, ec)) {
    return NotFound("cannot create directory '" + path + "': " + (ec ? ec.message() : std::string("not a directory")));
  }
  return OkStatus();
}

}  // namespace consensor
