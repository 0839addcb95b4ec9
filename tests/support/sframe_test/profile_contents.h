// Test support: everything a sframe-prof data file holds, in file order,
// as read_profile() hands it over (for the host's profile tests and the
// VM's sframe-prof suite).
#ifndef SFRAME_TEST_PROFILE_CONTENTS_H
#define SFRAME_TEST_PROFILE_CONTENTS_H

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sframe_profile/profile.h"

namespace sframe {

struct ProfileContents : ProfileHandler {
  std::vector<std::pair<std::string, std::string>> meta;
  std::vector<ProfileMapping> maps;
  std::vector<std::pair<pid_t, std::string>> comms;
  std::vector<Sample> samples;
  uint64_t lost = 0;
  void on_meta(const std::string& k, const std::string& v) override { meta.emplace_back(k, v); }
  void on_mapping(const ProfileMapping& m) override { maps.push_back(m); }
  void on_comm(pid_t p, const std::string& n) override { comms.emplace_back(p, n); }
  void on_sample(const Sample& s) override { samples.push_back(s); }
  void on_lost(uint64_t n) override { lost += n; }
};

}  // namespace sframe

#endif  // SFRAME_TEST_PROFILE_CONTENTS_H
