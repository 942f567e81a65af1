/* translate_tables.h: the four translators' rule tables (translate_tables.c), for translate.c only. */
#ifndef MIXPAR_TRAIN_TRANSLATE_TABLES_H
#define MIXPAR_TRAIN_TRANSLATE_TABLES_H

#include "train/translate.h"

extern const tr_table tr_deepspeed_table, tr_megatron_table, tr_fsdp_table, tr_horovod_table;
/* key.path=value into the translation (config_set's reading of the value). */
bool tr_set(tr_result *r, const char *to, const char *value, data_err *err);

#endif
