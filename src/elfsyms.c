#include "elfsyms.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

  Elf_Scn *symtab = NULL, *dynsym = NULL;
  GElf_Shdr symtab_hdr, dynsym_hdr;
  for (Elf_Scn *scn = elf_nextscn(e, NULL); scn; scn = elf_nextscn(e, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    if (sh.sh_type == SHT_SYMTAB) symtab = scn, symtab_hdr = sh;
    if (sh.sh_type == SHT_DYNSYM) dynsym = scn, dynsym_hdr = sh;
  }
  elf->syms = kf_symtab_new();
  if (!elf->syms) {
    rc = -ENOMEM;
    goto out;
  }
  if (symtab) {
    elf->from_symtab = 1;
    rc = add_symbols(e, symtab, &symtab_hdr, elf->syms);
  } else if (dynsym) {
    rc = add_symbols(e, dynsym, &dynsym_hdr, elf->syms);
  } else {
    rc = 0;
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
  free(elf);
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
