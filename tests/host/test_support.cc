// SPDX-License-Identifier: GPL-2.0
#include "test_support.h"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <cctype>
#include <sstream>

namespace sftest {

std::vector<uint8_t> read_file(const std::string &path)
{
	std::ifstream f(path, std::ios::binary);
	return std::vector<uint8_t>(std::istreambuf_iterator<char>(f),
				    std::istreambuf_iterator<char>());
}

template <typename T>
static bool get(const std::vector<uint8_t> &b, uint64_t off, T &v)
{
	if (off > b.size() || sizeof(T) > b.size() - off)
		return false;
	std::memcpy(&v, b.data() + off, sizeof(T));
	return true;
}

std::string load_elf(const std::string &path, ElfInfo &out)
{
	std::vector<uint8_t> b = read_file(path);
	Elf64_Ehdr eh;

	if (!get(b, 0, eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB)
		return "not a 64-bit little-endian ELF: " + path;
	std::vector<Elf64_Shdr> sh(eh.e_shnum);
	for (unsigned i = 0; i < eh.e_shnum; i++)
		if (!get(b, eh.e_shoff + (uint64_t)i * eh.e_shentsize, sh[i]))
			return "bad section header table";
	if (eh.e_shstrndx >= sh.size())
		return "no section name table";
	const Elf64_Shdr &names = sh[eh.e_shstrndx];
	auto name_of = [&](uint32_t off) -> std::string {
		uint64_t at = names.sh_offset + off;
		if (at >= b.size())
			return "";
		return std::string((const char *)b.data() + at,
				   strnlen((const char *)b.data() + at,
					   b.size() - at));
	};

	bool have_sframe = false, have_text = false;
	for (const Elf64_Shdr &s : sh) {
		std::string n = name_of(s.sh_name);
		if (n == ".sframe") {
			if (s.sh_offset + s.sh_size > b.size())
				return ".sframe past the end of the file";
			out.sframe.assign(b.begin() + s.sh_offset,
					  b.begin() + s.sh_offset + s.sh_size);
			out.sframe_addr = s.sh_addr;
			have_sframe = true;
		}
		if ((s.sh_flags & SHF_EXECINSTR) && s.sh_size) {
			if (!have_text || s.sh_addr < out.text_lo)
				out.text_lo = s.sh_addr;
			if (!have_text || s.sh_addr + s.sh_size > out.text_hi)
				out.text_hi = s.sh_addr + s.sh_size;
			have_text = true;
		}
		if (s.sh_type == SHT_SYMTAB && s.sh_link < sh.size()) {
			const Elf64_Shdr &str = sh[s.sh_link];
			for (uint64_t o = 0; o + sizeof(Elf64_Sym) <= s.sh_size;
			     o += sizeof(Elf64_Sym)) {
				Elf64_Sym sym;
				if (!get(b, s.sh_offset + o, sym))
					break;
				if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC ||
				    !sym.st_size || !sym.st_value)
					continue;
				uint64_t at = str.sh_offset + sym.st_name;
				std::string n2;
				if (at < b.size())
					n2 = (const char *)b.data() + at;
				out.funcs.push_back(
					{ n2, sym.st_value, sym.st_size });
			}
		}
	}
	if (!have_sframe)
		return "no .sframe section in " + path;
	if (!have_text)
		return "no executable section in " + path;
	return "";
}

namespace {

// A tiny scanner over one line of readelf output.
struct Scan {
	const std::string &s;
	size_t i = 0;

	explicit Scan(const std::string &line) : s(line) {}
	void spaces()
	{
		while (i < s.size() && (s[i] == ' ' || s[i] == '\t'))
			i++;
	}
	bool lit(const char *t)
	{
		size_t n = std::strlen(t);
		if (s.compare(i, n, t))
			return false;
		i += n;
		return true;
	}
	bool hex(uint64_t &v, size_t digits)
	{
		size_t n = 0;
		v = 0;
		while (i < s.size() && std::isxdigit((unsigned char)s[i]) &&
		       (!digits || n < digits)) {
			char ch = (char)std::tolower((unsigned char)s[i]);
			v = v * 16 + (uint64_t)(ch <= '9' ? ch - '0'
							  : ch - 'a' + 10);
			i++;
			n++;
		}
		return n && (!digits || n == digits);
	}
	bool dec(uint64_t &v)
	{
		size_t n = 0;
		v = 0;
		while (i < s.size() && std::isdigit((unsigned char)s[i])) {
			v = v * 10 + (uint64_t)(s[i] - '0');
			i++;
			n++;
		}
		return n > 0;
	}
	// [+-]digits
	bool sdec(int64_t &v)
	{
		if (i >= s.size() || (s[i] != '+' && s[i] != '-'))
			return false;
		bool neg = s[i++] == '-';
		uint64_t u;
		if (!dec(u))
			return false;
		v = neg ? -(int64_t)u : (int64_t)u;
		return true;
	}
	bool end()
	{
		spaces();
		return i == s.size();
	}
};

} // namespace

// The FRE columns are printed with %-10s, so a long CFA field runs into the
// FP field ("sp+39999896u"): scan tokens, not columns.
std::string parse_readelf_sframe(const std::string &text, ReadelfDump &out)
{
	std::istringstream in(text);
	std::string line;
	ReadelfFde *cur = nullptr;

	while (std::getline(in, line)) {
		Scan sc(line);
		uint64_t a, b, c;

		sc.spaces();
		if (sc.lit("Version: SFRAME_VERSION_")) {
			if (!sc.dec(a))
				return "bad version line: " + line;
			out.version = (int)a;
		} else if (sc.lit("Num FDEs:")) {
			sc.spaces();
			if (!sc.dec(a))
				return "bad FDE count: " + line;
			out.num_fdes = (unsigned)a;
		} else if (sc.lit("Num FREs:")) {
			sc.spaces();
			if (!sc.dec(a))
				return "bad FRE count: " + line;
			out.num_fres = (unsigned)a;
		} else if (sc.lit("func idx [")) {
			if (!sc.dec(a) || !sc.lit("]: pc = 0x") || !sc.hex(b, 0) ||
			    !sc.lit(", size = ") || !sc.dec(c) ||
			    !sc.lit(" bytes"))
				return "bad FDE line: " + line;
			if (a != out.fdes.size())
				return "FDE index out of sequence: " + line;
			out.fdes.emplace_back();
			cur = &out.fdes.back();
			cur->pc = b;
			cur->size = c;
		} else if (sc.lit("STARTPC")) {
			if (!cur)
				return "row header before an FDE";
			cur->pcmask = sc.lit("[m]");
		} else if (sc.hex(a, 16)) {
			if (!cur)
				return "row before an FDE: " + line;
			ReadelfFre r;
			r.pc = a;
			sc.spaces();
			if (sc.lit("RA undefined")) {
				r.ra_undefined = true;
			} else {
				if (sc.lit("sp"))
					r.cfa_sp = true;
				else if (!sc.lit("fp"))
					return "bad CFA: " + line;
				if (!sc.sdec(r.cfa_off))
					return "bad CFA offset: " + line;
				sc.spaces();
				if (sc.lit("c")) {
					r.fp_saved = true;
					if (!sc.sdec(r.fp_off))
						return "bad FP: " + line;
				} else if (!sc.lit("u")) {
					return "bad FP: " + line;
				}
				sc.spaces();
				if (sc.lit("c")) {
					r.ra = 'c';
					if (!sc.sdec(r.ra_off))
						return "bad RA: " + line;
				} else if (sc.lit("f")) {
					r.ra = 'f';
				} else if (sc.lit("u")) {
					r.ra = 'u';
				} else {
					return "bad RA: " + line;
				}
				sc.lit("[s]");
			}
			if (!sc.end())
				return "trailing text: " + line;
			cur->fres.push_back(r);
		}
	}
	if (out.fdes.size() != out.num_fdes)
		return "FDE count differs from the header line";
	return "";
}

} // namespace sftest
