// Version 1 of sframe-prof's data file (text, docs/sframe-prof-format.md of
// earlier releases): its reader, private to sframe-profile.
#ifndef SFRAME_PROFILE_PROFILE_V1_H
#define SFRAME_PROFILE_PROFILE_V1_H

#include <istream>
#include <string>

#include "sframe_profile/profile.h"

namespace sframe {

// Reads a text file (version 1) from its first byte; mappings have no build
// id.  Throws sframe::Error(EBADMSG, op::kReadProfile, "NAME:LINE").
void read_profile_v1(std::istream& in, const std::string& name, ProfileHandler* handler);

}  // namespace sframe

#endif  // SFRAME_PROFILE_PROFILE_V1_H
