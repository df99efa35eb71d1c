# Installs what runs the daemon as a service: the default config under
# etc/gpubridge/, the systemd unit and the man pages (from docs/man/, with
# the installed paths filled in), and every wire schema in one folder,
# share/gpubridge/proto/, for clients in other languages (proto/ and each
# grain's folder in the source tree). The binaries install with their targets.
include(GNUInstallDirs)
set(GB_SYSTEMD_UNIT_DIR "lib/systemd/system" CACHE STRING
    "Where the systemd unit goes, relative to the install prefix")
set(GB_BINDIR ${CMAKE_INSTALL_FULL_BINDIR})
set(GB_ETC ${CMAKE_INSTALL_FULL_SYSCONFDIR})
if(IS_ABSOLUTE "${GB_SYSTEMD_UNIT_DIR}")
  set(GB_UNITDIR ${GB_SYSTEMD_UNIT_DIR})
else()
  set(GB_UNITDIR ${CMAKE_INSTALL_PREFIX}/${GB_SYSTEMD_UNIT_DIR})
endif()
set(GB_VERSION ${PROJECT_VERSION})

install(FILES ${PROJECT_SOURCE_DIR}/config/gpubridge.cfg
        DESTINATION ${CMAKE_INSTALL_SYSCONFDIR}/gpubridge)
configure_file(${PROJECT_SOURCE_DIR}/config/gpubridge.service.in
               ${PROJECT_BINARY_DIR}/gpubridge.service @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/gpubridge.service DESTINATION ${GB_SYSTEMD_UNIT_DIR})
install(FILES ${GB_PROTOS} DESTINATION ${CMAKE_INSTALL_DATADIR}/gpubridge/proto)
foreach(page gpubridge.8 gbctl.1)
  string(REGEX MATCH "[0-9]$" section ${page})
  configure_file(${PROJECT_SOURCE_DIR}/docs/man/${page} ${PROJECT_BINARY_DIR}/man/${page} @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/man/${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
endforeach()
# The pkg-config files' prefix, relative to the .pc file (lib*/pkgconfig),
# so that an install relocates (cmake --install --prefix anywhere).
file(RELATIVE_PATH GB_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" GB_PC_TO_PREFIX "${GB_PC_TO_PREFIX}")
