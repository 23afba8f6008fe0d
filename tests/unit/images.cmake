# The image store without root: spec parsing, store operations on a temporary store (names,
# atomic publish, a failed build leaving nothing, rm), and the OCI layer check refusing each
# hostile entry kind in tars built here with libarchive.
airlock_add_test(images_unit_tests LABEL unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/image_spec_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/image_store_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/image_layer_check_test.cc
  LIBS airlock_images archive)
