// coverd_vmbench: how long a binary never seen before waits, from its exec,
// for sframe-coverd to put its SFrame in the module's file store.
//
//   coverd_vmbench [--runs N] [PROGRAM [ARGS...]]
//
// Needs a running sframe-coverd (root: the store is listed by anyone, but
// copies are made in /tmp).  Each run copies PROGRAM (default: /usr/bin/xz
// -9 -T1 -c /dev/urandom, which runs until killed) to a new file whose
// build id is changed to random bytes, so that neither the service nor its
// on-disk cache has seen it: the service must open it, make its SFrame from
// .eh_frame and supply it.  The clock starts just before execve() (in the
// child, taken from CLOCK_MONOTONIC) and stops when the module's store
// lists an entry of the copy's inode (polled every millisecond).  Prints
// each run, then the median, minimum and maximum.  Measures, asserts
// nothing.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "sframe_client/sframe_client.hpp"
#include "sframe_object/object_file.h"

namespace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

std::vector<uint8_t> unhex(const std::string& h) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(uint8_t(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

// A copy of program at path with its build id's bytes replaced by random
// ones (the note keeps its place and size: the ELF stays as it was).
bool copy_with_new_build_id(const std::string& program, const std::string& path,
                            std::mt19937_64* rng) {
  std::ifstream in(program, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<uint8_t> id = unhex(sframe::read_build_id(program));
  if (id.empty()) return false;
  auto at = std::search(bytes.begin(), bytes.end(), id.begin(), id.end(),
                        [](char a, uint8_t b) { return uint8_t(a) == b; });
  if (at == bytes.end()) return false;
  for (size_t i = 0; i < id.size(); i++) at[i] = char((*rng)() & 0xff);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  out.close();
  return out && chmod(path.c_str(), 0755) == 0;
}

bool listed(const sframe::Device& dev, uint64_t ino, uint64_t size) {
  for (const sframe::FileInfo& f : dev.list_files()) {
    if (f.ino == ino && f.file_size == size) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 20;
  int first = 1;
  if (argc > 2 && std::strcmp(argv[1], "--runs") == 0) {
    runs = std::atoi(argv[2]);
    first = 3;
  }
  std::vector<std::string> command;
  for (int i = first; i < argc; i++) command.push_back(argv[i]);
  if (command.empty()) command = {"/usr/bin/xz", "-9", "-T1", "-c", "/dev/urandom"};
  sframe::Device dev;
  char dir[] = "/tmp/coverd-bench-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  std::mt19937_64 rng(now_ns());
  // The clock of the child's exec, shared.
  auto* exec_at = static_cast<uint64_t*>(
      mmap(nullptr, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::vector<double> ms;
  for (int r = 0; r < runs; r++) {
    const std::string path = std::string(dir) + "/prog-" + std::to_string(r);
    if (!copy_with_new_build_id(command[0], path, &rng)) {
      std::fprintf(stderr, "coverd_vmbench: cannot copy %s with a new build id\n", command[0].c_str());
      return 1;
    }
    struct stat st;
    stat(path.c_str(), &st);
    *exec_at = 0;
    const pid_t pid = fork();
    if (pid == 0) {
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      std::vector<char*> args;
      args.push_back(const_cast<char*>(path.c_str()));
      for (size_t i = 1; i < command.size(); i++) args.push_back(const_cast<char*>(command[i].c_str()));
      args.push_back(nullptr);
      *exec_at = now_ns();
      execv(path.c_str(), args.data());
      _exit(127);
    }
    uint64_t seen = 0;
    const uint64_t give_up = now_ns() + 60ull * 1000000000u;
    while (now_ns() < give_up) {
      if (listed(dev, st.st_ino, uint64_t(st.st_size))) {
        seen = now_ns();
        break;
      }
      usleep(1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    if (!seen || !*exec_at) {
      std::printf("run %d: not covered within 60 s\n", r);
      continue;
    }
    ms.push_back(double(seen - *exec_at) / 1e6);
    std::printf("run %d: %s covered %.1f ms after its exec\n", r, path.c_str(), ms.back());
    std::fflush(stdout);
    // The entry goes with the file: the store is left as it was.
    unlink(path.c_str());
  }
  rmdir(dir);
  if (ms.empty()) return 1;
  std::sort(ms.begin(), ms.end());
  std::printf("exec to coverage, %zu of %d runs of %s: median %.1f ms, min %.1f, max %.1f\n",
              ms.size(), runs, command[0].c_str(), ms[ms.size() / 2], ms.front(), ms.back());
  return 0;
}
