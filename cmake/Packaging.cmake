# The Debian package (docs/operations.md, "Packaging and installing"):
#   cpack --config BUILD/CPackConfig.cmake -G DEB
# One package, tidemark: the binaries, the built-in plugins, the SDK header
# and .pc, the man pages, and the service files (component "service").

# Man pages: troff source in docs/man, compressed at build time as Debian
# ships them.
set(TM_MAN_PAGES tidemark.1 tidemark-sinkcheck.1)
set(TM_MAN_OUT)
foreach(page ${TM_MAN_PAGES})
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/man/${page}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
    COMMAND gzip -9n -c ${PROJECT_SOURCE_DIR}/docs/man/${page}
            > ${CMAKE_BINARY_DIR}/man/${page}.gz
    DEPENDS ${PROJECT_SOURCE_DIR}/docs/man/${page}
    VERBATIM)
  list(APPEND TM_MAN_OUT ${CMAKE_BINARY_DIR}/man/${page}.gz)
endforeach()
add_custom_target(tm_man_pages ALL DEPENDS ${TM_MAN_OUT})
install(FILES ${TM_MAN_OUT} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

# Files at absolute places of a system install: only in the package, never
# in `cmake --install --prefix DIR` (EXCLUDE_FROM_ALL), which must not
# write to /etc.
set(TM_PKG_DIR ${PROJECT_SOURCE_DIR}/scripts/packaging)
install(FILES ${TM_PKG_DIR}/tidemark.service
  DESTINATION /lib/systemd/system COMPONENT service EXCLUDE_FROM_ALL)
install(FILES ${TM_PKG_DIR}/tidemark.sysusers
  DESTINATION /usr/lib/sysusers.d RENAME tidemark.conf
  COMPONENT service EXCLUDE_FROM_ALL)
install(FILES ${TM_PKG_DIR}/default
  DESTINATION /etc/default RENAME tidemark COMPONENT service EXCLUDE_FROM_ALL)
# The directory the unit reads configs from, empty (root's, 0755).
install(DIRECTORY DESTINATION /etc/tidemark COMPONENT service EXCLUDE_FROM_ALL)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT service
  EXCLUDE_FROM_ALL FILES_MATCHING PATTERN "*.json")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tidemark)
set(CPACK_PACKAGE_VENDOR tidemark)
set(CPACK_PACKAGE_CONTACT "tidemark maintainers <tidemark@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "Kafka sink plugin host with exactly-once commits into databases")
set(CPACK_PACKAGE_DESCRIPTION
  "tidemark reads Kafka topics through a consumer group and hands batches to
sink plugins (PostgreSQL, SQLite, iceberg-lite) that commit rows and progress
markers in one transaction: exactly-once into the database under crashes.
Includes tidemark-sinkcheck, the conformance kit for sink plugins.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends computed by dpkg-shlibdeps from the ELF files (libc6, librdkafka1,
# libpq5, libjansson4, libsqlite3-0 ...); adduser for postinst's fallback.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "systemd")
# conffiles: dpkg keeps an operator's edits of /etc/default/tidemark over
# upgrades (CPack lists none by itself).
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${TM_PKG_DIR}/postinst ${TM_PKG_DIR}/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Every component, the EXCLUDE_FROM_ALL one too, in the one package.
set(CPACK_COMPONENTS_ALL Unspecified service)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/package)
include(CPack)
