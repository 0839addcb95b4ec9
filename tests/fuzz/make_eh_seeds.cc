// Writes fuzz_eh_frame seeds: for each ELF file given, its .eh_frame behind
// the 21-byte header fuzz_eh_frame.cc reads (section address, text hull,
// options), once per option byte 0 to 3.
//   make_eh_seeds DIR FILE...
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

void le(std::vector<uint8_t>& b, uint64_t v, int n) {
  for (int i = 0; i < n; i++) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

bool seed_of(const char* path, std::vector<uint8_t>& out) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return false;
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  bool ok = false;
  size_t phnum = 0, shstrndx = 0;
  uint64_t lo = ~uint64_t{0}, hi = 0;
  if (elf != nullptr && elf_getphdrnum(elf, &phnum) == 0 &&
      elf_getshdrstrndx(elf, &shstrndx) == 0) {
    for (size_t i = 0; i < phnum; i++) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, static_cast<int>(i), &ph) == nullptr) continue;
      if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
        if (ph.p_vaddr < lo) lo = ph.p_vaddr;
        if (ph.p_vaddr + ph.p_memsz > hi) hi = ph.p_vaddr + ph.p_memsz;
      }
    }
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn && hi > lo; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr sh;
      if (gelf_getshdr(scn, &sh) == nullptr) continue;
      const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
      if (name == nullptr || std::strcmp(name, ".eh_frame") != 0) continue;
      Elf_Data* d = elf_rawdata(scn, nullptr);
      if (d == nullptr || d->d_buf == nullptr) break;
      le(out, sh.sh_addr, 8);
      le(out, lo, 8);
      le(out, hi - lo, 4);
      out.push_back(0);
      const auto* p = static_cast<const uint8_t*>(d->d_buf);
      out.insert(out.end(), p, p + d->d_size);
      ok = true;
      break;
    }
  }
  if (elf != nullptr) elf_end(elf);
  close(fd);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: make_eh_seeds DIR FILE...\n");
    return 2;
  }
  elf_version(EV_CURRENT);
  for (int i = 2; i < argc; i++) {
    std::vector<uint8_t> seed;
    if (!seed_of(argv[i], seed)) {
      std::fprintf(stderr, "make_eh_seeds: no .eh_frame in %s\n", argv[i]);
      continue;
    }
    std::string base = argv[i];
    base = base.substr(base.rfind('/') + 1);
    for (uint8_t opt = 0; opt < 4; opt++) {
      seed[20] = opt;
      const std::string out = std::string(argv[1]) + "/" + base + ".eh" + std::to_string(opt);
      FILE* f = std::fopen(out.c_str(), "wb");
      if (f == nullptr) return 1;
      std::fwrite(seed.data(), 1, seed.size(), f);
      std::fclose(f);
    }
  }
  return 0;
}
