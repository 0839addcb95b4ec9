// sframe-gen: the build id of an ELF file, what identifies an object across
// hosts, containers and upgrades (a path does not).
#ifndef SFRAME_GEN_BUILD_ID_H
#define SFRAME_GEN_BUILD_ID_H

#include <string>

#include "sframe_client/fd.h"

namespace sframe {

// The NT_GNU_BUILD_ID of the ELF file, in lowercase hex; empty if it has
// none.  Throws sframe::Error(op::kReadElf, path or name): open()'s errno,
// ENOEXEC for a file that is not ELF.
std::string read_build_id(const std::string& path);
// Of a file already open (e.g. /proc/PID/map_files/START-END); name is for
// errors.
std::string read_build_id(UniqueFd fd, const std::string& name);

}  // namespace sframe

#endif  // SFRAME_GEN_BUILD_ID_H
