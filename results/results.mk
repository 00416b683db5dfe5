# results/: run-file schema, validator and comparison tool. Reads JSON only (jansson); never links
# the trainer or MPI.  Binaries: $(B)/bin/pcoll-validate, $(B)/bin/pcoll-compare.
# Tests: tests/results.tests (names res_*), sources and sample files in tests/results/.

$(B)/results/%.o: results/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(B)/bin/pcoll-validate: $(B)/results/validate.o $(B)/results/jschema.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ -ljansson $(LDLIBS)

PCOLL_COMPARE_OBJS := $(patsubst %,$(B)/results/compare%.o,_base _load _keys _group _stats _print _export _plot _versus) \
                      $(B)/results/compare.o
$(B)/bin/pcoll-compare: $(PCOLL_COMPARE_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ -ljansson $(LDLIBS)

$(B)/tests/results/test_jschema: tests/results/test_jschema.c $(B)/results/jschema.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MF $@.d $< -o $@ $(LDFLAGS) $(B)/results/jschema.o -ljansson $(LDLIBS)

ALL_BINS  += $(B)/bin/pcoll-validate $(B)/bin/pcoll-compare
TEST_BINS += $(B)/tests/results/test_jschema

.PHONY: results
results: $(B)/bin/pcoll-validate $(B)/bin/pcoll-compare $(B)/tests/results/test_jschema
