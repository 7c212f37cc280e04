// safetensors parser / mmap reader / atomic and streaming writers / sharded index. Format: 8-byte
// little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}, __metadata__},
// then the data section. Every rule the format states is checked; duplicates are found with a
// callback during parsing (nlohmann would keep the last silently). Tested in tests/io/safetensors_test.cpp.
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "io/staging.h"
#include "media/atomic_file.h"

namespace vortex {

namespace {

using nlohmann::json;

std::string quote(std::string_view s) {
  std::string out = "'";
  for (char ch : s.substr(0, 200)) out += (static_cast<unsigned char>(ch) < 0x20) ? '?' : ch;
  if (s.size() > 200) out += "...";
  return out + "'";
}

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

struct DepthLimitExceeded : std::runtime_error {
  DepthLimitExceeded() : std::runtime_error("JSON nested too deeply") {}
};

// Parses JSON, recording the first duplicate key at any object level.
Result<json> parse_json_strict(std::string_view text, std::string_view label, const char* what) {
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    if (depth > 64) throw DepthLimitExceeded();
    switch (event) {
      case json::parse_event_t::object_start:
        keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys.empty() && parsed.is_string() && !keys.back().insert(parsed.get<std::string>()).second &&
            duplicate.empty())
          duplicate = parsed.get<std::string>();
        break;
      default:
        break;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const std::exception& e) {
    return format_error(std::string(label) + ": " + what + " is not valid JSON (" + e.what() + ")");
  }
  if (!duplicate.empty())
    return format_error(std::string(label) + ": " + what + " has the key " + quote(duplicate) +
                        " more than once; the file is corrupt or was written by a broken tool");
  return j;
}

}  // namespace

const SafetensorsEntry* SafetensorsHeader::find(std::string_view name) const {
  for (const SafetensorsEntry& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}

Result<SafetensorsHeader> parse_safetensors_header(const uint8_t* data, size_t available, uint64_t file_size,
                                                   std::string_view label) {
  const std::string lab(label);
  if (file_size < 8 || available < 8)
    return format_error(lab + ": file is " + std::to_string(file_size) +
                        " bytes, too short for a safetensors header (needs at least 8); is it truncated?");
  SafetensorsHeader h;
  h.header_bytes = read_le64(data);
  if (h.header_bytes > kMaxSafetensorsHeaderBytes)
    return format_error(lab + ": header length " + std::to_string(h.header_bytes) + " exceeds the 100 MB limit; " +
                        "this is not a safetensors file or it is corrupt");
  if (h.header_bytes > file_size - 8)
    return format_error(lab + ": header length " + std::to_string(h.header_bytes) + " runs past the end of the " +
                        std::to_string(file_size) + "-byte file (truncated download?)");
  if (h.header_bytes > available - 8) return internal_error(lab + ": header bytes not available to the parser");
  h.data_offset = 8 + h.header_bytes;
  h.data_bytes = file_size - h.data_offset;
  std::string_view text(reinterpret_cast<const char*>(data + 8), static_cast<size_t>(h.header_bytes));
  VORTEX_ASSIGN_OR_RETURN(json root, parse_json_strict(text, label, "header"));
  if (!root.is_object())
    return format_error(lab + ": header must be a JSON object, got " + std::string(root.type_name()));

  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) return format_error(lab + ": __metadata__ must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          return format_error(lab + ": __metadata__ value for " + quote(m.key()) + " must be a string, got " +
                              std::string(m.value().type_name()));
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = lab + ": tensor " + quote(name);
    if (name.empty()) return format_error(lab + ": a tensor has an empty name");
    if (!v.is_object()) return format_error(where + ": entry must be an object {dtype, shape, data_offsets}");
    for (auto f = v.begin(); f != v.end(); ++f)
      if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets")
        return format_error(where + ": unexpected field " + quote(f.key()));
    SafetensorsEntry e;
    e.name = name;
    auto dt = v.find("dtype");
    if (dt == v.end() || !dt->is_string()) return format_error(where + ": missing or non-string 'dtype'");
    Result<DType> dtype = dtype_from_name(dt->get<std::string>());
    if (!dtype.ok()) return format_error(where + ": unknown dtype " + quote(dt->get<std::string>()));
    e.dtype = *dtype;
    auto sh = v.find("shape");
    if (sh == v.end() || !sh->is_array()) return format_error(where + ": missing or non-array 'shape'");
    if (sh->size() > 16) return format_error(where + ": shape has " + std::to_string(sh->size()) + " dims (max 16)");
    // numel * dtype size must not overflow; anything over 2^62 bytes cannot be in a file anyway.
    unsigned __int128 bytes = dtype_size(e.dtype);
    for (const json& d : *sh) {
      if (!d.is_number_integer() || (d.is_number_integer() && !d.is_number_unsigned() && d.get<int64_t>() < 0))
        return format_error(where + ": shape " + sh->dump() + " must hold non-negative integers");
      uint64_t dim = d.get<uint64_t>();
      if (dim > (1ull << 62)) return format_error(where + ": shape dimension " + d.dump() + " is too large");
      e.shape.push_back(static_cast<int64_t>(dim));
      bytes *= dim;
      // Checked left to right like shape_numel, so later int64 element counts cannot overflow.
      if (bytes > (static_cast<unsigned __int128>(1) << 62))
        return format_error(where + ": shape " + sh->dump() + " " + dtype_name(e.dtype) +
                            " needs more than 2^62 bytes");
    }
    auto off = v.find("data_offsets");
    if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      return format_error(where + ": 'data_offsets' must be [begin, end] with non-negative integers");
    e.begin = (*off)[0].get<uint64_t>();
    e.end = (*off)[1].get<uint64_t>();
    if (e.end < e.begin)
      return format_error(where + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                          "] end before begin");
    if (e.end > h.data_bytes)
      return format_error(where + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                          "] outside the " + std::to_string(h.data_bytes) + "-byte data section (truncated file?)");
    if (bytes != static_cast<unsigned __int128>(e.end - e.begin))
      return format_error(where + ": shape " + shape_to_string(e.shape) + " " + dtype_name(e.dtype) + " needs " +
                          std::to_string(static_cast<uint64_t>(bytes)) + " bytes but data_offsets cover " +
                          std::to_string(e.end - e.begin));
    h.entries.push_back(std::move(e));
  }
  std::sort(h.entries.begin(), h.entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  const SafetensorsEntry* prev = nullptr;
  for (const SafetensorsEntry& e : h.entries) {
    if (e.bytes() == 0) continue;  // empty tensors occupy no bytes and cannot overlap
    if (e.begin < cursor)
      return format_error(lab + ": tensors " + quote(prev->name) + " [" + std::to_string(prev->begin) + ", " +
                          std::to_string(prev->end) + ") and " + quote(e.name) + " [" + std::to_string(e.begin) + ", " +
                          std::to_string(e.end) + ") overlap in the data section");
    if (e.begin > cursor)
      h.warnings.push_back("gap of " + std::to_string(e.begin - cursor) + " unused bytes before tensor " +
                           quote(e.name) + " (the format expects contiguous tensors)");
    cursor = e.end;
    prev = &e;
  }
  if (cursor < h.data_bytes)
    h.warnings.push_back(std::to_string(h.data_bytes - cursor) + " trailing bytes after the last tensor");
  return h;
}

Result<SafetensorsHeader> parse_safetensors_buffer(const uint8_t* data, size_t size, std::string_view label) {
  return parse_safetensors_header(data, size, size, label);
}

// ---- mmap reader ------------------------------------------------------------------------------

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path, bool follow_symlinks) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (follow_symlinks ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return not_found(path + ": no such file");
    if (err == ELOOP && !follow_symlinks)
      return invalid_argument(path + ": is a symbolic link, which is not followed here (give a regular file)");
    return io_error(path + ": cannot open (" + std::strerror(err) + ")");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return io_error(path + ": cannot stat (" + std::strerror(err) + ")");
  }
  if (!S_ISREG(st.st_mode)) {  // a wrong path given by the user: bad input
    ::close(fd);
    return invalid_argument(path + (S_ISDIR(st.st_mode) ? ": is a directory, expected a .safetensors file"
                                                        : ": not a regular file, expected a .safetensors file"));
  }
  SafetensorsFile f;
  f.path_ = path;
  f.file_bytes_ = static_cast<uint64_t>(st.st_size);
  if (f.file_bytes_ < 8) {
    ::close(fd);
    return format_error(path + ": file is " + std::to_string(f.file_bytes_) +
                        " bytes, too short for a safetensors header (needs at least 8); is it truncated?");
  }
  void* p = ::mmap(nullptr, static_cast<size_t>(f.file_bytes_), PROT_READ, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) return io_error(path + ": mmap failed (" + std::strerror(err) + ")");
  auto storage = std::make_shared<Storage>();
  storage->ptr = p;
  storage->bytes = static_cast<size_t>(f.file_bytes_);
  storage->device = Device::kCpu;
  storage->release = [](void* q, size_t n) { ::munmap(q, n); };
  f.mapping_ = std::move(storage);
  VORTEX_ASSIGN_OR_RETURN(
      f.header_, parse_safetensors_buffer(static_cast<const uint8_t*>(p), static_cast<size_t>(f.file_bytes_), path));
  return f;
}

Result<Tensor> SafetensorsFile::tensor(std::string_view name) const {
  const SafetensorsEntry* e = header_.find(name);
  if (!e) return not_found(path_ + ": no tensor named " + quote(name));
  return Tensor::from_storage(mapping_, static_cast<size_t>(header_.data_offset + e->begin), e->shape, e->dtype);
}

// ---- writers ----------------------------------------------------------------------------------

namespace {

Status write_all(int fd, const void* data, size_t bytes, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd, p, std::min<size_t>(bytes, 1u << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(path + ": write failed (" + std::strerror(errno) + "); is the disk full?");
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

std::string parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void fsync_dir(const std::string& path) {
  int dfd = ::open(parent_dir(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

Status write_text_atomic(const std::string& path, const std::string& text) {
  VORTEX_RETURN_IF_ERROR(write_file_atomic(path, text));  // media/atomic_file.h: temp (O_NOFOLLOW), fsync, rename
  fsync_dir(path);
  return Status::Ok();
}

namespace {

// Row-major copy of a strided host tensor into `out` (dense).
void gather_strided(const Tensor& t, std::vector<uint8_t>& out) {
  const size_t es = dtype_size(t.dtype());
  const int64_t n = t.numel();
  out.resize(static_cast<size_t>(n) * es);
  const int nd = t.ndim();
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  const uint8_t* base = static_cast<const uint8_t*>(t.raw_data());
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int d = 0; d < nd; ++d) off += idx[static_cast<size_t>(d)] * t.stride(d);
    std::memcpy(out.data() + static_cast<size_t>(i) * es, base + off * static_cast<int64_t>(es), es);
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < t.dim(d)) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

}  // namespace

Result<std::unique_ptr<SafetensorsStreamWriter>> SafetensorsStreamWriter::create(
    const std::string& path, std::vector<SafetensorsTensorInfo> tensors,
    const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const SafetensorsTensorInfo& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      return invalid_argument(path + ": invalid tensor name " + quote(t.name));
    if (!seen.insert(t.name).second) return invalid_argument(path + ": tensor " + quote(t.name) + " listed twice");
    for (int64_t d : t.shape)
      if (d < 0) return invalid_argument(path + ": tensor " + quote(t.name) + " has a negative dimension");
    nlohmann::ordered_json e;
    e["dtype"] = dtype_name(t.dtype);
    e["shape"] = t.shape;
    e["data_offsets"] = {offset, offset + t.bytes()};
    header[t.name] = e;
    offset += t.bytes();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const std::exception& e) {  // invalid UTF-8 in a name or metadata value
    return invalid_argument(path + ": tensor names and metadata must be valid UTF-8 (" + e.what() + ")");
  }
  // Pad with spaces so the data section starts 64-byte aligned (views of every dtype are aligned).
  while ((8 + text.size()) % 64 != 0) text += ' ';
  if (text.size() > kMaxSafetensorsHeaderBytes)
    return invalid_argument(path + ": header would exceed 100 MB; shard the checkpoint");

  std::unique_ptr<SafetensorsStreamWriter> w(new SafetensorsStreamWriter());
  w->path_ = path;
  w->temp_path_ = path + ".tmp." + std::to_string(::getpid());
  w->tensors_ = std::move(tensors);
  sweep_stale_staging(path, ".tmp.", /*folders=*/false);  // temp files of writers that are gone
  register_staging(w->temp_path_);                        // removed by an interrupt (io/staging.h)
  w->fd_ = ::open(w->temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd_ < 0)
    return io_error(w->temp_path_ + ": cannot create (" + std::strerror(errno) + "); does the directory exist?");
  uint8_t len[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  VORTEX_RETURN_IF_ERROR(w->fail(write_all(w->fd_, len, 8, w->temp_path_)));
  VORTEX_RETURN_IF_ERROR(w->fail(write_all(w->fd_, text.data(), text.size(), w->temp_path_)));
  return w;
}

SafetensorsStreamWriter::~SafetensorsStreamWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
  if (!temp_path_.empty()) unregister_staging(temp_path_);
}

Status SafetensorsStreamWriter::fail(Status s) {
  if (!s.ok()) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    ::unlink(temp_path_.c_str());
  }
  return s;
}

Status SafetensorsStreamWriter::write_bytes(const void* data, size_t bytes) {
  if (fd_ < 0) return invalid_argument(path_ + ": writer is closed (an earlier write failed or finish() ran)");
  if (next_ >= tensors_.size()) return fail(invalid_argument(path_ + ": more tensor data than declared in the header"));
  const SafetensorsTensorInfo& info = tensors_[next_];
  if (written_in_current_ + bytes > info.bytes())
    return fail(invalid_argument(path_ + ": tensor " + quote(info.name) + " given more than its " +
                                 std::to_string(info.bytes()) + " bytes"));
  if (bytes > 0) VORTEX_RETURN_IF_ERROR(fail(write_all(fd_, data, bytes, temp_path_)));
  written_in_current_ += bytes;
  if (written_in_current_ == info.bytes()) {  // tensor complete (an empty tensor completes at once)
    ++next_;
    written_in_current_ = 0;
  }
  return Status::Ok();
}

Status SafetensorsStreamWriter::write_next(const Tensor& host) {
  if (fd_ < 0) return invalid_argument(path_ + ": writer is closed (an earlier write failed or finish() ran)");
  if (next_ >= tensors_.size()) return fail(invalid_argument(path_ + ": more tensors written than declared"));
  const SafetensorsTensorInfo& info = tensors_[next_];
  if (written_in_current_ != 0)
    return fail(invalid_argument(path_ + ": tensor " + quote(info.name) + " is partially written"));
  if (!host.defined() || host.shape() != info.shape || host.dtype() != info.dtype)
    return fail(invalid_argument(path_ + ": tensor " + quote(info.name) + " declared " + shape_to_string(info.shape) +
                                 " " + dtype_short_name(info.dtype) + ", given " +
                                 (host.defined() ? host.describe() : std::string("an undefined tensor"))));
  if (host.device() != Device::kCpu)
    return fail(invalid_argument(path_ + ": tensor " + quote(info.name) + " must be on the host to be written"));
  if (host.numel() == 0) return write_bytes(nullptr, 0);
  if (host.is_contiguous()) return write_bytes(host.raw_data(), host.nbytes());
  std::vector<uint8_t> dense;
  gather_strided(host, dense);
  return write_bytes(dense.data(), dense.size());
}

Status SafetensorsStreamWriter::finish() {
  if (fd_ < 0) return invalid_argument(path_ + ": writer is closed (an earlier write failed or finish() ran)");
  if (next_ != tensors_.size())
    return fail(invalid_argument(
        path_ + ": finish() before all tensors were written (next: " + quote(tensors_[next_].name) + ")"));
  if (::fsync(fd_) != 0) return fail(io_error(temp_path_ + ": fsync failed (" + std::strerror(errno) + ")"));
  if (::close(fd_) != 0) {
    fd_ = -1;
    return fail(io_error(temp_path_ + ": close failed (" + std::strerror(errno) + ")"));
  }
  fd_ = -1;
  auto hold = hold_staging();  // an interrupt waits until the file is in place
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0)
    return fail(io_error(path_ + ": rename from temp file failed (" + std::strerror(errno) + ")"));
  finished_ = true;
  unregister_staging(temp_path_);
  fsync_dir(path_);
  return Status::Ok();
}

Status write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsTensorInfo> infos;
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) return invalid_argument(path + ": tensor " + quote(name) + " is undefined");
    infos.push_back({name, t.dtype(), t.shape()});
  }
  VORTEX_ASSIGN_OR_RETURN(auto writer, SafetensorsStreamWriter::create(path, std::move(infos), metadata));
  for (const auto& [name, t] : tensors) VORTEX_RETURN_IF_ERROR(writer->write_next(t));
  return writer->finish();
}

// ---- sharded index ----------------------------------------------------------------------------

bool is_safetensors_index_path(std::string_view path) {
  constexpr std::string_view kSuffix = ".index.json";
  return path.size() >= kSuffix.size() && path.substr(path.size() - kSuffix.size()) == kSuffix;
}

Result<SafetensorsIndex> read_safetensors_index(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return not_found(path + ": no such file");
    return io_error(path + ": cannot open (" + std::strerror(errno) + ")");
  }
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return io_error(path + ": read failed");
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxSafetensorsHeaderBytes) {
      ::close(fd);
      return format_error(path + ": index larger than 100 MB");
    }
  }
  ::close(fd);
  VORTEX_ASSIGN_OR_RETURN(json j, parse_json_strict(text, path, "index"));
  if (!j.is_object()) return format_error(path + ": index must be a JSON object");
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) return format_error(path + ": index has no 'weight_map' object");
  SafetensorsIndex index;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string())
      return format_error(path + ": weight_map entry " + quote(it.key()) + " must name a shard file");
    std::string shard = it.value().get<std::string>();
    if (shard.empty() || shard[0] == '/' || shard.find("..") != std::string::npos)
      return format_error(path + ": weight_map entry " + quote(it.key()) + " names an unsafe shard path " +
                          quote(shard) + " (must be relative, without '..')");
    index.weight_map[it.key()] = shard;
  }
  if (auto md = j.find("metadata"); md != j.end() && md->is_object())
    for (auto it = md->begin(); it != md->end(); ++it)
      index.metadata[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
  return index;
}

Status write_safetensors_index(const std::string& path, const SafetensorsIndex& index) {
  nlohmann::ordered_json j;
  nlohmann::ordered_json md = nlohmann::ordered_json::object();
  for (const auto& [k, v] : index.metadata) {
    if (k == "total_size" && !v.empty() && v.find_first_not_of("0123456789") == std::string::npos)
      md[k] = std::stoull(v);
    else md[k] = v;
  }
  j["metadata"] = md;
  j["weight_map"] = nlohmann::ordered_json::object();
  for (const auto& [k, v] : index.weight_map) j["weight_map"][k] = v;
  std::string text;
  try {
    text = j.dump(2) + "\n";
  } catch (const std::exception& e) {
    return invalid_argument(path + ": index names must be valid UTF-8 (" + e.what() + ")");
  }
  return write_text_atomic(path, text);
}

Result<SafetensorsSet> SafetensorsSet::open(const std::string& path) {
  SafetensorsSet set;
  set.path_ = path;
  if (!is_safetensors_index_path(path)) {
    VORTEX_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(path));
    set.files_.push_back(std::move(f));
  } else {
    VORTEX_ASSIGN_OR_RETURN(SafetensorsIndex index, read_safetensors_index(path));
    std::vector<std::string> shards;
    for (const auto& [name, shard] : index.weight_map)
      if (std::find(shards.begin(), shards.end(), shard) == shards.end()) shards.push_back(shard);
    std::sort(shards.begin(), shards.end());
    const std::string dir = parent_dir(path);
    for (const std::string& shard : shards) {
      VORTEX_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(dir + "/" + shard));
      for (const SafetensorsEntry& e : f.entries()) {
        auto it = index.weight_map.find(e.name);
        if (it == index.weight_map.end() || it->second != shard)
          return format_error(f.path() + ": tensor " + quote(e.name) + " is not listed for this shard in " + path);
      }
      set.files_.push_back(std::move(f));
    }
    for (const auto& [name, shard] : index.weight_map) {
      size_t fi = static_cast<size_t>(std::find(shards.begin(), shards.end(), shard) - shards.begin());
      if (!set.files_[fi].contains(name))
        return format_error(path + ": weight_map says " + quote(name) + " is in " + shard + " but that shard " +
                            "has no such tensor");
    }
  }
  for (size_t fi = 0; fi < set.files_.size(); ++fi) {
    const auto& entries = set.files_[fi].entries();
    for (size_t ei = 0; ei < entries.size(); ++ei) {
      if (!set.refs_.emplace(entries[ei].name, Ref{fi, ei}).second)
        return format_error(path + ": tensor " + quote(entries[ei].name) + " appears in more than one shard");
      set.names_.push_back(entries[ei].name);
    }
  }
  return set;
}

const SafetensorsSet::Ref* SafetensorsSet::find(std::string_view name) const {
  auto it = refs_.find(name);
  return it == refs_.end() ? nullptr : &it->second;
}

Result<Tensor> SafetensorsSet::tensor(std::string_view name) const {
  const Ref* r = find(name);
  if (!r) return not_found(path_ + ": no tensor named " + quote(name));
  return files_[r->file].tensor(name);
}

const std::map<std::string, std::string>& SafetensorsSet::metadata() const {
  static const std::map<std::string, std::string> kEmpty;
  return files_.empty() ? kEmpty : files_.front().metadata();
}

}  // namespace vortex
