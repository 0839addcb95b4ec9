// sframe-gen: SFrame for another process (SFRAME_IOC_SUPPLY).
//
// A profiler covers a process's binaries by handing the module their
// .sframe by value: read from the file (or, later, generated), placed
// where the file is mapped in the target.
#ifndef SFRAME_GEN_SUPPLY_H
#define SFRAME_GEN_SUPPLY_H

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sframe_client/device.h"

namespace sframe {

// The .sframe section of an ELF file, read with libelf.
struct FileSframe {
  std::string path;
  uint64_t address = 0;  // sh_addr: its address relative to the load bias
  std::vector<uint8_t> bytes;
};

// Of an object already open (object.name() in errors).  Throws
// sframe::Error(op::kReadElf, object.name()): ENOEXEC for a malformed
// section header table, ENODATA when it has no .sframe section.
class ObjectFile;
FileSframe read_sframe_from_file(const ObjectFile& object);
// The same for the file at path (opened here, once), for a command line's
// file and for tests.  Throws sframe::Error(op::kReadElf, path) as above,
// and with the errno of open(), ENOEXEC for a file that is not ELF.
FileSframe read_sframe_from_file(const std::string& path);

// Where the ELF file `path` is mapped in process pid: its load bias (what
// its virtual addresses are shifted by), from /proc/PID/maps, which needs
// the right to ptrace-read pid.  image_vaddr is the file's virtual address
// of file offset 0 (p_vaddr - p_offset of its first PT_LOAD).  Throws
// sframe::Error(op::kFindObject): ENOENT when the file is not mapped there.
uint64_t load_bias_in_process(pid_t pid, const std::string& path, uint64_t image_vaddr);

// What supply_file_sframe() handed over, in the target's addresses.
struct SuppliedSection {
  std::string path;
  uint64_t text_start = 0;
  uint64_t text_len = 0;
  uint64_t sframe_addr = 0;
  uint64_t sframe_len = 0;
};

// Reads the .sframe section of the ELF file `path` and supplies it to the
// module for process pid (0: this one), for the file's executable text as
// mapped there.  Throws sframe::Error: op::kReadElf (see
// read_sframe_from_file), op::kFindObject, op::kSupply.
SuppliedSection supply_file_sframe(const Device& dev, pid_t pid, const std::string& path);

}  // namespace sframe

#endif  // SFRAME_GEN_SUPPLY_H
