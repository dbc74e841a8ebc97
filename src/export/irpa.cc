#include "src/export/irpa.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "src/base/file_io.h"
#include "src/base/temp_files.h"

namespace fg::exporter {

namespace {

constexpr uint32_t kMagic = 0x41505249u;  // "IRPA"
constexpr uint64_t kHeaderSize = 88;      // iree_io_parameter_archive_header_v0_t
constexpr uint64_t kEntrySize = 76;       // iree_io_parameter_archive_data_entry_t
constexpr uint64_t kEntryAlign = 16;
constexpr uint64_t kFileAlign = 4096;     // storage starts page-aligned, file padded to pages
constexpr uint32_t kEntryTypeData = 2;

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

void Put(std::vector<uint8_t>& b, uint64_t at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));  // LE
}

Status WriteAll(int fd, const uint8_t* p, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return IoError("irpa: cannot write '" + path + "': " + std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return OkStatus();
}

}  // namespace

Status IrpaWriter::Add(std::string name, uint64_t length, Fill fill, uint64_t alignment) {
  if (name.empty()) return InvalidArgumentError("irpa: empty parameter name");
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > kFileAlign) {
    return InvalidArgumentError("irpa: parameter '" + name + "': alignment " +
                                std::to_string(alignment) + " is not a power of two <= 4096");
  }
  for (const Entry& e : entries_) {
    if (e.name == name) return InvalidArgumentError("irpa: duplicate parameter '" + name + "'");
  }
  entries_.push_back({std::move(name), length, std::move(fill), alignment});
  return OkStatus();
}

IrpaWriter::Layout IrpaWriter::ComputeLayout() const {
  Layout l;
  l.entry_table_offset = AlignUp(kHeaderSize, kEntryAlign);
  l.entry_table_length = entries_.size() * AlignUp(kEntrySize, kEntryAlign);
  l.metadata_offset = l.entry_table_offset + l.entry_table_length;
  uint64_t m = 0;
  for (const Entry& e : entries_) {
    l.name_offsets.push_back(m);
    m += e.name.size();
  }
  l.metadata_length = m;
  l.storage_offset = AlignUp(l.metadata_offset + l.metadata_length, kFileAlign);
  uint64_t s = 0;
  for (const Entry& e : entries_) {
    s = AlignUp(s, e.alignment);
    l.storage_offsets.push_back(s);
    s += e.length;
  }
  l.storage_length = s;
  l.file_size = AlignUp(l.storage_offset + l.storage_length, kFileAlign);
  return l;
}

uint64_t IrpaWriter::FileSize() const { return ComputeLayout().file_size; }

std::vector<uint8_t> IrpaWriter::HeaderAndTables(const Layout& l) const {
  std::vector<uint8_t> b(l.storage_offset, 0);
  Put(b, 0, kMagic, 4);
  Put(b, 4, 0, 2);  // version_major
  Put(b, 6, 0, 2);  // version_minor
  Put(b, 8, kHeaderSize, 8);
  Put(b, 16, 0, 8);  // next_header_offset
  Put(b, 24, 0, 8);  // flags
  Put(b, 32, entries_.size(), 8);
  Put(b, 40, l.entry_table_offset, 8);
  Put(b, 48, l.entry_table_length, 8);
  Put(b, 56, l.metadata_offset, 8);
  Put(b, 64, l.metadata_length, 8);
  Put(b, 72, l.storage_offset, 8);
  Put(b, 80, l.storage_length, 8);
  for (size_t i = 0; i < entries_.size(); ++i) {
    const uint64_t at = l.entry_table_offset + i * AlignUp(kEntrySize, kEntryAlign);
    Put(b, at + 0, kEntrySize, 8);             // entry_size
    Put(b, at + 8, kEntryTypeData, 4);         // type
    Put(b, at + 12, 0, 8);                     // flags
    Put(b, at + 20, l.name_offsets[i], 8);     // name.offset (metadata segment)
    Put(b, at + 28, entries_[i].name.size(), 8);
    Put(b, at + 36, 0, 8);                     // metadata: none
    Put(b, at + 44, 0, 8);
    Put(b, at + 52, entries_[i].alignment, 8);  // minimum_alignment
    Put(b, at + 60, l.storage_offsets[i], 8);   // storage.offset (storage segment)
    Put(b, at + 68, entries_[i].length, 8);
    std::memcpy(b.data() + l.metadata_offset + l.name_offsets[i], entries_[i].name.data(),
                entries_[i].name.size());
  }
  return b;
}

Status IrpaWriter::WriteFile(const std::string& path, const Progress& progress) const {
  const Layout l = ComputeLayout();
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  // Removed on any failure, an exception or SIGINT/SIGTERM (src/base/temp_files.h).
  TempPath tmp_path(tmp);
  ScopedFd owned(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  const int fd = owned.get();
  if (fd < 0) return IoError("irpa: cannot create '" + tmp + "': " + std::strerror(errno));
  std::vector<uint8_t> head = HeaderAndTables(l);
  if (Status s = WriteAll(fd, head.data(), head.size(), path); !s.ok()) return s;
  uint64_t pos = 0;  // relative to the storage segment
  std::vector<uint8_t> buf;
  const std::vector<uint8_t> zeros(kFileAlign, 0);
  for (size_t i = 0; i < entries_.size(); ++i) {
    const uint64_t pad = l.storage_offsets[i] - pos;
    if (Status s = WriteAll(fd, zeros.data(), pad, path); !s.ok()) return s;
    buf.assign(entries_[i].length, 0);
    if (entries_[i].fill) {
      if (Status s = entries_[i].fill(buf); !s.ok()) {
        return s.WithContext("irpa: parameter '" + entries_[i].name + "'");
      }
    }
    if (Status s = WriteAll(fd, buf.data(), buf.size(), path); !s.ok()) return s;
    pos = l.storage_offsets[i] + entries_[i].length;
    if (progress) progress(pos, l.storage_length);
  }
  const uint64_t tail = l.file_size - (l.storage_offset + pos);
  if (Status s = WriteAll(fd, zeros.data(), tail, path); !s.ok()) return s;
  if (::fsync(fd) != 0) return IoError("irpa: cannot sync '" + tmp + "'");
  if (::close(owned.Release()) != 0) return IoError("irpa: cannot close '" + tmp + "'");
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return IoError("irpa: cannot rename to '" + path + "': " + std::strerror(errno));
  }
  tmp_path.Keep();
  return OkStatus();
}

}  // namespace fg::exporter
