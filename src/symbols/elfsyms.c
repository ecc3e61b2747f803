#include "symbols/elfsyms.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbols/xz.h"

static int add_symbols(Elf *e, Elf_Scn *scn, GElf_Shdr *shdr, kf_symtab_t *t) {
  Elf_Data *data = elf_getdata(scn, NULL);
  if (!data || shdr->sh_entsize == 0) return 0;
  size_t n = shdr->sh_size / shdr->sh_entsize;
  for (size_t i = 0; i < n; i++) {
    GElf_Sym sym;
    if (!gelf_getsym(data, (int)i, &sym)) continue;
    int type = GELF_ST_TYPE(sym.st_info);
    if (type != STT_FUNC && type != STT_GNU_IFUNC) continue;
    if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
    const char *name = elf_strptr(e, shdr->sh_link, sym.st_name);
    if (!name || !*name) continue;
    if (kf_symtab_add(t, sym.st_value, sym.st_size, name, strlen(name)) != 0)
      return -ENOMEM;
  }
  return 0;
}

/* The NT_GNU_BUILD_ID note of a note section, if it is there. */
static void read_build_id(Elf_Scn *scn, kf_elf_t *elf) {
  Elf_Data *data = elf_getdata(scn, NULL);
  if (!data || !data->d_buf) return;
  size_t off = 0, name_off, desc_off;
  GElf_Nhdr nh;
  while ((off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
        memcmp((const char *)data->d_buf + name_off, "GNU", 4) == 0 &&
        nh.n_descsz > 0 && nh.n_descsz <= KF_ELF_MAX_BUILD_ID) {
      memcpy(elf->build_id, (const char *)data->d_buf + desc_off, nh.n_descsz);
      elf->build_id_len = nh.n_descsz;
      return;
    }
  }
}

/* .gnu_debuglink: a NUL-terminated file name, padding to 4 bytes, then the
 * CRC32 of the debug file. A name with a slash, or none, is ignored: it is
 * looked up only beside the object and under debug directories. */
static int read_debuglink(Elf_Scn *scn, kf_elf_t *elf) {
  Elf_Data *data = elf_getdata(scn, NULL);
  if (!data || !data->d_buf || data->d_size < 8) return 0;
  const char *p = data->d_buf;
  size_t len = strnlen(p, data->d_size);
  size_t crc_at = (len + 4) & ~(size_t)3;
  if (len == 0 || len >= 256 || crc_at + 4 > data->d_size || memchr(p, '/', len))
    return 0;
  if (!(elf->debuglink = strndup(p, len))) return -ENOMEM;
  memcpy(&elf->debuglink_crc, p + crc_at, 4);
  return 0;
}

/* MiniDebugInfo: the functions .dynsym lacks, from the .symtab of the
 * xz-compressed ELF in .gnu_debugdata. Returns 0 (also when there is none
 * or it cannot be read: the object keeps .dynsym) or -ENOMEM. */
static int add_debugdata(Elf_Scn *scn, kf_symtab_t *t) {
  Elf_Data *data = elf_getdata(scn, NULL);
  if (!data || !data->d_buf || data->d_size == 0) return 0;
  void *image;
  size_t len;
  int rc = kf_xz_decode(data->d_buf, data->d_size, KF_ELF_MAX_DEBUGDATA, &image, &len);
  if (rc != 0) return rc == -ENOMEM ? rc : 0;
  Elf *e = elf_memory(image, len);
  rc = 0;
  if (e && elf_kind(e) == ELF_K_ELF) {
    for (Elf_Scn *s = elf_nextscn(e, NULL); s && rc == 0; s = elf_nextscn(e, s)) {
      GElf_Shdr sh;
      if (gelf_getshdr(s, &sh) && sh.sh_type == SHT_SYMTAB) rc = add_symbols(e, s, &sh, t);
    }
  }
  if (e) elf_end(e);
  free(image);
  return rc;
}

int kf_elf_parse(const void *image, size_t size, kf_elf_t **out) {
  if (elf_version(EV_CURRENT) == EV_NONE) return -ENOEXEC;
  Elf *e = elf_memory((char *)image, size);
  if (!e) return -ENOEXEC;
  int rc = -ENOEXEC;
  kf_elf_t *elf = calloc(1, sizeof(*elf));
  if (!elf) {
    rc = -ENOMEM;
    goto out;
  }
  if (elf_kind(e) != ELF_K_ELF) goto out;

  size_t nphdr;
  if (elf_getphdrnum(e, &nphdr) != 0) goto out;
  for (size_t i = 0; i < nphdr && elf->nloads < KF_ELF_MAX_LOADS; i++) {
    GElf_Phdr ph;
    if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD) continue;
    elf->loads[elf->nloads].offset = ph.p_offset;
    elf->loads[elf->nloads].vaddr = ph.p_vaddr;
    elf->loads[elf->nloads].filesz = ph.p_filesz;
    elf->nloads++;
  }

  Elf_Scn *symtab = NULL, *dynsym = NULL, *debugdata = NULL;
  GElf_Shdr symtab_hdr, dynsym_hdr;
  size_t shstrndx;
  if (elf_getshdrstrndx(e, &shstrndx) != 0) shstrndx = 0;
  for (Elf_Scn *scn = elf_nextscn(e, NULL); scn; scn = elf_nextscn(e, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    if (sh.sh_type == SHT_SYMTAB) symtab = scn, symtab_hdr = sh;
    if (sh.sh_type == SHT_DYNSYM) dynsym = scn, dynsym_hdr = sh;
    if (sh.sh_type == SHT_NOTE && elf->build_id_len == 0) read_build_id(scn, elf);
    const char *name = shstrndx ? elf_strptr(e, shstrndx, sh.sh_name) : NULL;
    if (!name || sh.sh_type == SHT_NOBITS) continue;
    if (strcmp(name, ".gnu_debuglink") == 0 && !elf->debuglink &&
        read_debuglink(scn, elf) != 0) {
      rc = -ENOMEM;
      goto out;
    }
    if (strcmp(name, ".gnu_debugdata") == 0) debugdata = scn;
  }
  elf->syms = kf_symtab_new();
  if (!elf->syms) {
    rc = -ENOMEM;
    goto out;
  }
  rc = 0;
  elf->syms_from = KF_SYMS_DYNSYM;
  if (symtab) {
    elf->from_symtab = 1;
    elf->syms_from = KF_SYMS_SYMTAB;
    rc = add_symbols(e, symtab, &symtab_hdr, elf->syms);
  } else {
    if (dynsym) rc = add_symbols(e, dynsym, &dynsym_hdr, elf->syms);
    size_t before = kf_symtab_count(elf->syms);
    if (rc == 0 && debugdata) rc = add_debugdata(debugdata, elf->syms);
    if (kf_symtab_count(elf->syms) > before) elf->syms_from = KF_SYMS_MINIDEBUG;
  }
  if (rc == 0) kf_symtab_finish(elf->syms, 0);

out:
  elf_end(e);
  if (rc != 0) {
    kf_elf_free(elf);
    return rc;
  }
  *out = elf;
  return 0;
}

int kf_elf_load(const char *path, kf_elf_t **out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int rc = -errno;
    close(fd);
    return rc;
  }
  if (!S_ISREG(st.st_mode) || st.st_size == 0) {
    close(fd);
    return -ENOEXEC;
  }
  void *image = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (image == MAP_FAILED) return -errno;
  int rc = kf_elf_parse(image, (size_t)st.st_size, out);
  munmap(image, (size_t)st.st_size);
  return rc;
}

void kf_elf_free(kf_elf_t *elf) {
  if (!elf) return;
  kf_symtab_free(elf->syms);
  free(elf->debuglink);
  free(elf);
}

void kf_elf_adopt_symbols(kf_elf_t *elf, kf_elf_t *debug) {
  kf_symtab_free(elf->syms);
  elf->syms = debug->syms;
  debug->syms = NULL;
  elf->syms_from = KF_SYMS_DEBUG_FILE;
  kf_elf_free(debug);
}

int kf_elf_vaddr(const kf_elf_t *elf, uint64_t file_offset, uint64_t *vaddr) {
  for (size_t i = 0; i < elf->nloads; i++) {
    uint64_t off = elf->loads[i].offset;
    if (file_offset >= off && file_offset < off + elf->loads[i].filesz) {
      *vaddr = file_offset - off + elf->loads[i].vaddr;
      return 0;
    }
  }
  return -1;
}
