#include "sframe_object/object_table.h"

#include <sys/stat.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <utility>

namespace sframe {

namespace {

// Failures kept at most, of each kind: a recording of every process of a
// machine meets processes without end; forgetting the old ones costs an
// open that fails again.
constexpr size_t kMaxKeptFailures = 4096;

int64_t ns_of(const struct timespec& t) { return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec; }

std::string proc_of(pid_t pid) {
  return "/proc/" + (pid ? std::to_string(pid) : std::string("self"));
}


// stat() of the file process pid maps as m, the way open_mapped_file()
// would open it: its map_files entry, else the path in its root, which
// must have the mapped inode.  False when neither can be stat()ed.
bool stat_mapped(pid_t pid, const MapsEntry& m, struct stat* st) {
  if (::stat(map_files_path(pid, m.start, m.end).c_str(), st) == 0) return true;
  if (errno != EPERM && errno != EACCES) return false;
  const std::string in_root = proc_of(pid) + "/root" + m.name();
  return ::stat(in_root.c_str(), st) == 0 && uint64_t(st->st_ino) == m.inode;
}

}  // namespace

ObjectTable::ObjectTable(size_t max_held) : max_held_(max_held ? max_held : 1) {}

ObjectTable::HeldList::iterator ObjectTable::lookup(const FileKey& key) {
  const auto it = index_.find(key);
  if (it == index_.end()) return held_.end();
  const HeldList::iterator h = it->second;
  if (!h->object->unchanged()) {
    stats_.changed++;
    let_go(h);
    return held_.end();
  }
  held_.splice(held_.begin(), held_, h);
  return h;
}

ObjectTable::HeldList::iterator ObjectTable::lookup(const struct stat& st) {
  const FileKey key{uint64_t(st.st_dev), uint64_t(st.st_ino)};
  HeldList::iterator h = lookup(key);
  if (h != held_.end()) return h;
  const auto it = by_content_.find(ContentKey{uint64_t(st.st_ino), uint64_t(st.st_size),
                                              ns_of(st.st_mtim), ns_of(st.st_ctim)});
  if (it == by_content_.end()) return held_.end();
  h = it->second;
  if (!h->object->unchanged()) {
    stats_.changed++;
    let_go(h);
    return held_.end();
  }
  held_.splice(held_.begin(), held_, h);
  add_key(h, key);
  return h;
}

void ObjectTable::add_key(HeldList::iterator h, const FileKey& key) {
  const auto it = index_.find(key);
  if (it != index_.end()) {
    if (it->second == h) return;
    // Another object held under this key (one its file replaced, under a
    // key it shared): the key leads to h only.
    std::vector<FileKey>& old = it->second->keys;
    for (auto o = old.begin(); o != old.end();) o = *o == key ? old.erase(o) : o + 1;
    if (old.empty()) let_go(it->second);
  }
  index_[key] = h;
  h->keys.push_back(key);
}

void ObjectTable::let_go(HeldList::iterator h) {
  for (const FileKey& k : h->keys) {
    const auto it = index_.find(k);
    if (it != index_.end() && it->second == h) index_.erase(it);
  }
  const auto c = by_content_.find(h->content);
  if (c != by_content_.end() && c->second == h) by_content_.erase(c);
  held_.erase(h);
}

void ObjectTable::hold(std::shared_ptr<const ObjectFile> object, std::vector<FileKey> keys) {
  const SourceIdentity& id = object->identity();
  const ContentKey content{id.ino, id.size, id.mtime_ns, object->ctime_ns()};
  held_.push_front(Held{std::move(object), {}, content});
  const HeldList::iterator h = held_.begin();
  for (const FileKey& k : keys) add_key(h, k);
  by_content_[content] = h;
  while (held_.size() > max_held_) {
    stats_.evicted++;
    let_go(std::prev(held_.end()));
  }
}

void ObjectTable::throw_if_failed(const FileKey& key, const Route* route) {
  if (const auto f = file_failures_.find(key); f != file_failures_.end()) {
    stats_.refused++;
    throw f->second;
  }
  if (!route) return;
  if (const auto r = route_failures_.find(*route); r != route_failures_.end()) {
    stats_.refused++;
    throw r->second;
  }
}

void ObjectTable::keep_file_failure(const FileKey& key, const Error& e) {
  if (file_failures_.size() >= kMaxKeptFailures) file_failures_.clear();
  file_failures_.insert_or_assign(key, e);
}

void ObjectTable::keep_route_failure(const Route& route, const Error& e) {
  if (route_failures_.size() >= kMaxKeptFailures) route_failures_.clear();
  route_failures_.insert_or_assign(route, e);
}

std::shared_ptr<const ObjectFile> ObjectTable::adopt(OpenedFile file, const std::string& name,
                                                     const FileKey& key) {
  const FileKey own{uint64_t(file.st.st_dev), uint64_t(file.st.st_ino)};
  const HeldList::iterator held = lookup(file.st);
  if (held != held_.end()) {
    // The file was held after all (its way in could not be stat()ed
    // first): key leads there too, and this descriptor is closed.
    stats_.duplicates++;
    add_key(held, key);
    return held->object;
  }
  std::shared_ptr<const ObjectFile> object;
  try {
    object = std::make_shared<const ObjectFile>(ObjectFile::read(std::move(file), name));
  } catch (const Error& e) {
    // Not an object (not regular, not ELF): no other way in makes it one.
    stats_.failed++;
    keep_file_failure(key, e);
    if (own != key) keep_file_failure(own, e);
    throw;
  }
  std::vector<FileKey> keys{own};
  if (own != key) keys.push_back(key);
  hold(object, std::move(keys));
  return object;
}

std::shared_ptr<const ObjectFile> ObjectTable::open_mapped(pid_t pid, const MapsEntry& m) {
  const FileKey key{uint64_t(m.dev()), m.inode};
  HeldList::iterator h = lookup(key);
  if (h == held_.end()) {
    // Under the key its way in shows (opened by path before; a layer that
    // shows another device).
    struct stat st;
    if (stat_mapped(pid, m, &st)) {
      h = lookup(st);
      if (h != held_.end()) add_key(h, key);
    }
  }
  if (h != held_.end()) {
    stats_.reused++;
    return h->object;
  }
  const Route route{key, pid, m.start, m.end};
  throw_if_failed(key, &route);
  // The name as the process has it (" (deleted)" included): no path leads
  // to an unlinked file, map_files does.
  const std::string name = m.name();
  OpenedFile file;
  try {
    file = open_mapped_file(pid, m.start, m.end, name, m.inode);
  } catch (const Error& e) {
    stats_.failed++;
    keep_route_failure(route, e);
    throw;
  }
  stats_.opened++;
  return adopt(std::move(file), name, key);
}

std::shared_ptr<const ObjectFile> ObjectTable::open_mapped(pid_t pid, uint64_t start,
                                                           uint64_t end,
                                                           const std::string& path) {
  if (pid > 0) {
    struct stat st;
    if (::stat(map_files_path(pid, start, end).c_str(), &st) == 0) {
      // The very file mapped, and what it is held under, without opening it.
      const FileKey key{uint64_t(st.st_dev), uint64_t(st.st_ino)};
      const HeldList::iterator h = lookup(st);
      if (h != held_.end()) {
        stats_.reused++;
        return h->object;
      }
      const Route route{key, pid, start, end};
      throw_if_failed(key, &route);
      OpenedFile file;
      try {
        file = open_mapped_file(pid, start, end, path, uint64_t(st.st_ino));
      } catch (const Error& e) {
        stats_.failed++;
        keep_route_failure(route, e);
        throw;
      }
      stats_.opened++;
      return adopt(std::move(file), path, key);
    }
    if (errno == EPERM || errno == EACCES) {
      // map_files may not be followed (open_mapped_file()): the line of the
      // mapping names the inode that the path in the process's root must
      // have.  A mapping not found there is gone: the path below.
      std::vector<MapsEntry> maps;
      try {
        maps = read_maps(pid);
      } catch (const Error&) {
        // The process is gone.
      }
      for (const MapsEntry& m : maps) {
        if (m.is_file() && m.start <= start && start < m.end && m.name() == path) {
          return open_mapped(pid, m);
        }
      }
    }
  }
  return open_path(path);
}

std::shared_ptr<const ObjectFile> ObjectTable::open_path(const std::string& path) {
  struct stat st;
  const bool there = ::stat(path.c_str(), &st) == 0;
  const FileKey key{there ? uint64_t(st.st_dev) : 0, there ? uint64_t(st.st_ino) : 0};
  if (there) {
    const HeldList::iterator h = lookup(st);
    if (h != held_.end()) {
      stats_.reused++;
      return h->object;
    }
    throw_if_failed(key, nullptr);
  }
  OpenedFile file;
  try {
    file = open_object_file(path);
  } catch (const Error& e) {
    stats_.failed++;
    // There but not ours to open (EACCES): so for every way in.  Not there:
    // nothing to keep (stat() finds it once it is).
    if (there) keep_file_failure(key, e);
    throw;
  }
  stats_.opened++;
  const FileKey own{uint64_t(file.st.st_dev), uint64_t(file.st.st_ino)};
  return adopt(std::move(file), path, own);
}

}  // namespace sframe
